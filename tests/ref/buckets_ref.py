"""Sequence buckets' reference (tests/test_buckets_mpi.sh): exports export_models.py's GPT
with a context of 32 and a symbolic sequence dim "seq" (TorchScript, no constant folding,
so the LM head stays tied to wte), and trains the same model in PyTorch float64 with
AdamW on the batches examples/bucket_trainer.c feeds: step s at length
BUCKETS[(s - 1) % 3], global batch 4, token t of sample i = (131 s + 17 i + 7 t + t^2
mod 5) mod vocab, labels the next tokens; the loss is the mean cross-entropy over the
batch. Writes MODEL and the per-step losses, one "step length loss" line each, then the
trained model's loss on eval batch 1 (step 1's tokens) at every length ("eval length
loss"), to LOSSES.

usage: buckets_ref.py MODEL LOSSES STEPS"""
import contextlib
import io
import os
import sys
import warnings

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(__file__))
with contextlib.redirect_stderr(io.StringIO()):
    import export_models as em  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

BUCKETS = (8, 16, 32)
BATCH = 4
LR, BETAS, EPS = 1e-3, (0.9, 0.999), 1e-8   # pp_trainer_config_default's AdamW, no weight decay


def tokens(step, length, vocab):
    return torch.tensor([[(131 * step + 17 * i + 7 * t + (t * t) % 5) % vocab for t in range(length + 1)]
                         for i in range(BATCH)], dtype=torch.long)


def main(model_path, losses_path, steps):
    em.T = max(BUCKETS)                      # the model's context: wpe rows and the causal mask
    torch.manual_seed(0)
    gpt = em.GPT()
    gpt.perturb_norms()
    idx = torch.randint(0, em.V, (2, em.T))
    axes = {"idx": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    diff = em.export(gpt, (idx,), model_path, 17, axes, ("idx",), ("logits",), fold=False)
    print(f"exported {model_path}: onnxruntime vs torch max abs diff {diff:.3g}")
    gpt = gpt.double()
    gpt.train()
    opt = torch.optim.AdamW(gpt.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=0.0)
    with open(losses_path, "w") as out:
        for s in range(1, steps + 1):
            length = BUCKETS[(s - 1) % len(BUCKETS)]
            x = tokens(s, length, em.V)
            loss = F.cross_entropy(gpt(x[:, :-1]).reshape(-1, em.V), x[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.write(f"{s} {length} {loss.item():.12g}\n")
        with torch.no_grad():   # the trained model on eval batch 1 at every length
            for length in BUCKETS:
                x = tokens(1, length, em.V)
                loss = F.cross_entropy(gpt(x[:, :-1]).reshape(-1, em.V), x[:, 1:].reshape(-1))
                out.write(f"eval {length} {loss.item():.12g}\n")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
