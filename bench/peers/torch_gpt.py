"""The example GPT as PyTorch modules, written the way a PyTorch user writes it today
(nn.Linear, nn.LayerNorm, F.scaled_dot_product_attention with is_causal, exact GELU),
with the initial weights of the ONNX file onnxpipe trains. The model is cut into pieces
a pipeline stage can hold: Embed (wte + wpe), Block, Head (ln_f, then logits through the
token embedding, tied). `attention="matmul"` writes attention out as the ONNX graph does
(scores, the file's additive causal mask, softmax, product)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _t(a):
    return torch.from_numpy(a.copy())


class Embed(nn.Module):
    def __init__(self, cfg, w):
        super().__init__()
        self.wte = nn.Parameter(_t(w["wte.weight"]))   # [V, D]
        self.wpe = nn.Parameter(_t(w["wpe.weight"]))   # [T, D]

    def forward(self, ids):                            # ids (B, T) -> (B, T, D)
        return F.embedding(ids, self.wte) + self.wpe


def _linear(w, name):
    """nn.Linear from an ONNX MatMul weight [in, out] and its bias."""
    W, b = w[name + ".weight"], w[name + ".bias"]
    lin = nn.Linear(W.shape[0], W.shape[1])
    with torch.no_grad():
        lin.weight.copy_(_t(W.T))
        lin.bias.copy_(_t(b))
    return lin


def _layernorm(cfg, w, name):
    ln = nn.LayerNorm(cfg["d_model"], eps=cfg["eps"])
    with torch.no_grad():
        ln.weight.copy_(_t(w[name + ".weight"]))
        ln.bias.copy_(_t(w[name + ".bias"]))
    return ln


class Block(nn.Module):
    def __init__(self, cfg, w, layer, attention="sdpa"):
        super().__init__()
        p = f"h.{layer}"
        self.D, self.H, self.attention = cfg["d_model"], cfg["heads"], attention
        self.ln_1, self.ln_2 = _layernorm(cfg, w, p + ".ln_1"), _layernorm(cfg, w, p + ".ln_2")
        self.qkv, self.proj = _linear(w, p + ".attn.qkv"), _linear(w, p + ".attn.proj")
        self.fc, self.fc_proj = _linear(w, p + ".mlp.fc"), _linear(w, p + ".mlp.proj")
        if attention == "matmul":
            T = cfg["seq"]
            self.register_buffer("mask", torch.triu(torch.full((T, T), -1e9), 1), persistent=False)

    def attn(self, x):                                 # (B, T, D) -> (B, T, D)
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=2)
        q, k, v = (t.view(B, T, self.H, D // self.H).transpose(1, 2) for t in (q, k, v))
        if self.attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(D // self.H)) + self.mask
            y = s.softmax(-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, D))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x))))


class Head(nn.Module):
    """ln_f and the LM head through the token embedding. `wte` is the Embed's parameter
    when both are in one module (tied by sharing), else a copy whose gradient the caller
    sums with the Embed's."""

    def __init__(self, cfg, w, wte=None):
        super().__init__()
        self.ln_f = _layernorm(cfg, w, "ln_f")
        self.wte = wte if wte is not None else nn.Parameter(_t(w["wte.weight"]))

    def forward(self, x):                              # (B, T, D) -> logits (B, T, V)
        return self.ln_f(x) @ self.wte.t()


class GPT(nn.Module):
    def __init__(self, cfg, w, attention="sdpa"):
        super().__init__()
        self.embed = Embed(cfg, w)
        self.h = nn.ModuleList(Block(cfg, w, l, attention) for l in range(cfg["layers"]))
        self.head = Head(cfg, w, wte=self.embed.wte)

    def forward(self, ids):
        x = self.embed(ids)
        for blk in self.h:
            x = blk(x)
        return self.head(x)


class Stage(nn.Module):
    """Pipeline stage `index` of `n`: the blocks [first, last) of an even split of the
    layers, with the Embed on stage 0 and the Head on stage n-1."""

    def __init__(self, cfg, w, index, n, attention="sdpa"):
        super().__init__()
        L = cfg["layers"]
        if n > L:
            raise ValueError(f"{n} stages for {L} layers")
        first, last = index * L // n, (index + 1) * L // n
        self.embed = Embed(cfg, w) if index == 0 else None
        self.h = nn.ModuleList(Block(cfg, w, l, attention) for l in range(first, last))
        self.head = Head(cfg, w) if index == n - 1 else None

    def forward(self, x):
        if self.embed is not None:
            x = self.embed(x)
        for blk in self.h:
            x = blk(x)
        return self.head(x) if self.head is not None else x


def adamw(params, lr, weight_decay):
    """torch.optim.AdamW as onnxpipe's (betas 0.9, 0.999, eps 1e-8, decoupled decay on
    every parameter), fused where this torch has it on the cpu."""
    try:
        return torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=weight_decay,
                                 fused=True), "fused"
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=weight_decay), "for-loop"
