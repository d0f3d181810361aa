#!/usr/bin/env python3
"""Export a HuggingFace transformers or timm model to ONNX *for training* with onnxpipe.

Run it in the export venv (scripts/export-venv.sh prints its path):

    venv=$(scripts/export-venv.sh)
    $venv/bin/python examples/export/export_model.py --model gpt2 --layers 2 \
        --d-model 64 --heads 4 --vocab 128 --seq 32 --exporter torchscript \
        --save-weights -o gpt2.onnx

What it does, and why (docs/exporting.md has the long form):

* builds a small random-init model from command-line config values (no download), seeded;
* wraps it so the graph's one output is ``logits`` ([B, T, V] for language models,
  [B, classes] for classifiers); onnxpipe adds the loss
  (``--loss cross_entropy --logits logits --labels labels``);
* exports the model in **train mode**, so BatchNormalization is kept (an eval-mode export
  folds it into the Conv before it) and Dropout stays a Dropout:
    - ``--exporter torchscript``: ``torch.onnx.export(dynamo=False)``, opset 17 by default,
      ``training=TrainingMode.TRAINING`` and ``do_constant_folding=False`` (constant folding
      would transpose Linear weights into new initializers named ``onnx::MatMul_...``, and
      an eval-mode export deduplicates initializers of equal value);
    - ``--exporter dynamo``: ``torch.onnx.export(dynamo=True)`` (default opset, or
      ``--opset``), dynamic shapes from ``torch.export.Dim``, BatchNorm translated with
      ``training_mode=1`` (onnxscript's own translation writes an inference BatchNorm), and
      onnxscript's optimizer run with the parameters hidden from it (torch's
      ``optimize=True`` merges equal parameters, drops zero biases, folds transposed
      weight copies and fuses BatchNorm into Conv);
* HF decoders are exported without transformers' packed-sequence detection (a
  ``torch.diff``/``cumsum`` chain over the model's own position ids that finds nothing,
  and that the TorchScript exporter cannot export);
* dynamic batch (and, for text, sequence) axes; ``--attention-mask`` adds that input;
* writes ONNX ``metadata_props``:
    - ``onnxpipe.parameters``: JSON object, initializer name -> list of PyTorch parameter
      names (FQNs) it holds; more than one name = a tie or an exporter merge. Initializers
      not named there are constants (buffers, masks, rotary tables, lifted scalars).
    - ``onnxpipe.tied``: JSON list of lists of FQNs that PyTorch itself ties (one
      Parameter object under several names, e.g. GPT-2's wte and lm_head).
    - ``onnxpipe.transposed`` (only when an exporter stored a parameter transposed):
      initializer name -> FQNs whose transpose it holds.
    - ``onnxpipe.export``: JSON of the recipe (arguments, model config, inputs, versions),
      enough for ``rebuild()`` to make the same module again.
* runs the ONNX file in onnxruntime against the PyTorch module and prints the largest
  absolute difference of the logits (at the export shape and at another batch/sequence);
* ``--save-weights``: the exact initial ``state_dict`` as ``<out>.safetensors`` (``.npz``
  when safetensors is missing), so a test can train the same module from the same weights
  in PyTorch: ``model = rebuild("gpt2.onnx")``.
"""
import argparse
import copy
import json
import os
import re
import sys
import time
import warnings

import numpy as np
import torch

HF_MODELS = {
    # name: (kind, transformers config class, transformers model class)
    "gpt2": ("causal-lm", "GPT2Config", "GPT2LMHeadModel"),
    "llama": ("causal-lm", "LlamaConfig", "LlamaForCausalLM"),
    "qwen2": ("causal-lm", "Qwen2Config", "Qwen2ForCausalLM"),
    "mistral": ("causal-lm", "MistralConfig", "MistralForCausalLM"),
    "bert-mlm": ("masked-lm", "BertConfig", "BertForMaskedLM"),
    "bert-cls": ("seq-cls", "BertConfig", "BertForSequenceClassification"),
    "hf-vit": ("image-cls", "ViTConfig", "ViTForImageClassification"),
    "opt": ("causal-lm", "OPTConfig", "OPTForCausalLM"),
}
TEXT_KINDS = ("causal-lm", "masked-lm", "seq-cls")


def parse_value(text):
    """--set values: JSON where it parses (numbers, true/false/null, lists), else a string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def kind_of(model_name):
    if model_name in HF_MODELS:
        return HF_MODELS[model_name][0]
    return "timm"


# ----------------------------------------------------------------------------- build

def hf_config(args):
    import transformers as T

    kind, cfg_cls, _ = HF_MODELS[args.model]
    d, L, H = args.d_model, args.layers, args.heads
    ffn = args.ffn or 4 * d
    p = args.dropout
    maxpos = args.max_positions or args.seq
    kw = {}
    if args.model == "gpt2":
        kw = dict(n_layer=L, n_embd=d, n_head=H, n_inner=ffn, vocab_size=args.vocab,
                  n_positions=maxpos, resid_pdrop=p, embd_pdrop=p, attn_pdrop=p,
                  summary_first_dropout=p, bos_token_id=0, eos_token_id=0)
    elif args.model in ("llama", "qwen2", "mistral"):
        kw = dict(hidden_size=d, intermediate_size=ffn, num_hidden_layers=L,
                  num_attention_heads=H, num_key_value_heads=args.kv_heads or H,
                  vocab_size=args.vocab, max_position_embeddings=maxpos,
                  attention_dropout=p, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    elif args.model == "opt":
        # pad_token_id 0 as the other recipes (nn.Embedding's padding row gets no gradient)
        kw = dict(hidden_size=d, num_hidden_layers=L, num_attention_heads=H, ffn_dim=ffn,
                  word_embed_proj_dim=d, vocab_size=args.vocab, max_position_embeddings=maxpos,
                  dropout=p, attention_dropout=p, layerdrop=0.0, pad_token_id=0, bos_token_id=0,
                  eos_token_id=0)
    elif args.model in ("bert-mlm", "bert-cls"):
        kw = dict(hidden_size=d, num_hidden_layers=L, num_attention_heads=H,
                  intermediate_size=ffn, vocab_size=args.vocab, max_position_embeddings=maxpos,
                  hidden_dropout_prob=p, attention_probs_dropout_prob=p, pad_token_id=0)
        if args.model == "bert-cls":
            kw.update(num_labels=args.num_classes, classifier_dropout=p)
    elif args.model == "hf-vit":
        kw = dict(hidden_size=d, num_hidden_layers=L, num_attention_heads=H,
                  intermediate_size=ffn, image_size=args.image_size, patch_size=args.patch_size,
                  num_channels=3, num_labels=args.num_classes, hidden_dropout_prob=p,
                  attention_probs_dropout_prob=p)
    if args.tie is not None:
        kw["tie_word_embeddings"] = args.tie
    cfg = getattr(T, cfg_cls)(**kw)
    for key, value in args.set:
        setattr(cfg, key, value)
    return cfg


def timm_kwargs(args):
    kw = dict(pretrained=False, num_classes=args.num_classes, drop_rate=args.dropout)
    name = args.model
    if name.startswith("vit") or name.startswith("deit"):
        # A small ViT: the architecture of vit_tiny, smaller where the flags say so.
        kw.update(img_size=args.image_size, patch_size=args.patch_size)
        if args.layers_given:
            kw["depth"] = args.layers
        if args.d_model_given:
            kw["embed_dim"] = args.d_model
        if args.heads_given:
            kw["num_heads"] = args.heads
    elif name.startswith("swin"):
        # the window attention is built for one image size: --image-size's (the rest by --set:
        # embed_dim, depths, num_heads, window_size, patch_size, drop_path_rate)
        kw["img_size"] = args.image_size
    for key, value in args.set:
        kw[key] = value
    return kw


def build_module(args):
    """The PyTorch module (random init, seeded), in train mode."""
    torch.manual_seed(args.seed)
    if args.model in HF_MODELS:
        import transformers as T

        cfg = hf_config(args)
        cls = getattr(T, HF_MODELS[args.model][2])
        model = cls._from_config(cfg, attn_implementation=args.attn_implementation)
        config = cfg.to_dict()
    else:
        import timm

        if not timm.is_model(args.model):
            sys.exit(f"export_model: unknown model {args.model!r} (HF: {', '.join(HF_MODELS)};"
                     " or any timm model name, e.g. resnet50, mobilenetv3_small_050)")
        kw = timm_kwargs(args)
        model = timm.create_model(args.model, **kw)
        config = {"timm": args.model, **kw}
    model.train()
    return model, config


class LogitsOnly(torch.nn.Module):
    """The model with one output, the logits. Parameter FQNs inside gain the prefix 'model.'."""

    def __init__(self, model, kind, family):
        super().__init__()
        self.model = model
        self.kind = kind
        self.family = family

    def forward(self, x, attention_mask=None, position_ids=None):
        if self.kind == "timm":
            return self.model(x)
        if self.kind == "image-cls":
            return self.model(pixel_values=x, return_dict=True).logits
        if attention_mask is not None and attention_mask.dim() == 4:
            # a [batch, 1, seq, seq] keep-mask (1: attend), as onnxpipe's --pack writes it,
            # made the additive float mask transformers takes as is when it is 4-D
            keep = attention_mask.to(torch.float32)
            attention_mask = (1.0 - keep) * torch.finfo(torch.float32).min
        kw = dict(input_ids=x, attention_mask=attention_mask, return_dict=True)
        if position_ids is not None:
            kw["position_ids"] = position_ids
        if self.kind == "causal-lm":
            kw["use_cache"] = False
        return self.model(**kw).logits


def example_inputs(args, batch, seq, seed=1):
    g = torch.Generator().manual_seed(seed)
    kind = kind_of(args.model)
    if kind in TEXT_KINDS:
        ids = torch.randint(0, args.vocab, (batch, seq), generator=g, dtype=torch.int64)
        inputs = {"input_ids": ids}
        if args.attention_mask == "4d":  # two documents per sample, each causal in itself
            cut = max(1, seq // 3)
            doc = (torch.arange(seq) >= cut).to(torch.int64)
            causal = torch.tril(torch.ones(seq, seq, dtype=torch.int64))
            mask = causal * (doc[:, None] == doc[None, :]).to(torch.int64)
            inputs["attention_mask"] = mask.expand(batch, 1, seq, seq).contiguous()
        elif args.attention_mask:
            mask = torch.ones(batch, seq, dtype=torch.int64)
            if seq > 2:  # a padded tail on the first sample
                mask[0, seq - seq // 4:] = 0
            inputs["attention_mask"] = mask
        if args.position_ids:  # restarting at the second document, as packing writes them
            cut = max(1, seq // 3)
            pos = torch.arange(seq) - torch.where(torch.arange(seq) >= cut, cut, 0)
            inputs["position_ids"] = pos.expand(batch, seq).contiguous()
        return inputs
    return {"pixel_values": torch.randn(batch, 3, args.image_size, args.image_size, generator=g)}


def output_axes(kind):
    return {0: "batch", 1: "seq"} if kind in ("causal-lm", "masked-lm") else {0: "batch"}


# ----------------------------------------------------------------------------- export

class no_packed_sequence_detection:
    """transformers' decoders, given no attention_mask, look for packed sequences in
    position_ids: torch.diff, != 1, cumsum (masking_utils.find_packed_sequence_indices). The
    position_ids are the model's own arange here, so in eager mode that finds none and the
    mask is plain causal; but traced, the test cannot run, the chain is exported (CumSum and
    friends, all computed from constants) and the TorchScript exporter fails on it
    ("Exporting the operator 'aten::diff' to ONNX opset version 17 is not supported").
    The export runs without the detection unless --packed-sequences."""

    def __init__(self, args):
        self.active = not args.packed_sequences and args.model in HF_MODELS
        self.saved = None

    def __enter__(self):
        if self.active:
            try:
                import transformers.masking_utils as mu
            except ImportError:
                return self
            if hasattr(mu, "find_packed_sequence_indices"):
                self.saved = (mu, mu.find_packed_sequence_indices)
                mu.find_packed_sequence_indices = lambda position_ids: None
        return self

    def __exit__(self, *exc):
        if self.saved:
            mu, fn = self.saved
            mu.find_packed_sequence_indices = fn
        return False


def export_torchscript(wrapper, inputs, path, args):
    dyn = None
    if not args.static:
        axes = {0: "batch", 1: "seq"} if kind_of(args.model) in TEXT_KINDS else {0: "batch"}
        dyn = {name: axes for name in inputs}
        if args.attention_mask == "4d":
            dyn["attention_mask"] = {0: "batch", 2: "seq", 3: "seq"}
        dyn["logits"] = output_axes(kind_of(args.model))
    torch.onnx.export(
        wrapper, tuple(inputs.values()), path, dynamo=False,
        opset_version=args.opset or 17,
        training=torch.onnx.TrainingMode.TRAINING,  # keeps BatchNorm and Dropout
        do_constant_folding=False,  # keeps parameter initializers as they are, named
        input_names=list(inputs), output_names=["logits"], dynamic_axes=dyn,
        export_params=True, keep_initializers_as_inputs=False)


def export_dynamo(wrapper, inputs, path, args):
    from torch.export import Dim

    dyn = None
    if not args.static:
        batch = Dim("batch", min=1, max=4096)
        if kind_of(args.model) in TEXT_KINDS:
            seq = Dim("seq", min=2, max=args.max_positions or args.seq)
            axes = {0: batch, 1: seq}
        else:
            axes = {0: batch}
        dyn = {"x": axes}
        if "attention_mask" in inputs:
            dyn["attention_mask"] = {0: batch, 2: seq, 3: seq} if args.attention_mask == "4d" else axes
        if "position_ids" in inputs:
            dyn["position_ids"] = axes
    kw = {}
    if args.opset:
        kw["opset_version"] = args.opset
    if has_batchnorm(wrapper) and not args.eval_batchnorm:
        kw["custom_translation_table"] = batchnorm_training_translation()
    wrapper.train()  # BatchNorm with batch statistics, as in training
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Exporting a model while it is in training mode")
        prog = torch.onnx.export(
            wrapper, tuple(inputs.values()), dynamo=True, dynamic_shapes=dyn,
            input_names=list(inputs), output_names=["logits"], optimize=args.optimize == "full",
            external_data=is_large(wrapper), **kw)
    prog.save(path, external_data=is_large(wrapper))
    if args.optimize == "safe":
        import onnx

        params, _, _, _, _ = parameter_map(onnx.load(path), wrapper)
        optimize_keeping_parameters(path, set(params), is_large(wrapper))


def is_large(module):
    """Over protobuf's 2 GiB a model keeps its tensors in a .data file beside it (external
    data, which onnxpipe reads mmapped)."""
    return sum(t.numel() * t.element_size() for t in module.state_dict().values()) > 1_800_000_000


def save_onnx(model, path, large):
    import onnx

    if large:
        data = os.path.join(os.path.dirname(os.path.abspath(path)), os.path.basename(path) + ".data")
        if os.path.exists(data):  # onnx appends to it; every tensor is in memory by now
            os.remove(data)
        onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                  location=os.path.basename(path) + ".data", size_threshold=1024)
    else:
        onnx.save(model, path)


def batchnorm_training_translation():
    """dynamo: BatchNorm of a train() model as BatchNormalization(training_mode=1).

    torch.export writes a train-mode BatchNorm as aten._native_batch_norm_legit_functional
    with training=True, but onnxscript's translation of it forces training=False (a
    workaround for old onnxruntime builds) and writes BatchNormalization without
    training_mode: the exported graph normalizes with the initial running statistics
    (mean 0, var 1) instead of the batch's, and trains a different function. This
    translation keeps the batch statistics; the running-statistics updates are dropped
    (the exporter drops buffer mutations), as in the TorchScript exporter's TRAINING mode."""
    from onnxscript.function_libs.torch_lib.ops import core as torchlib

    op = torchlib.op

    def batch_norm(input, weight=None, bias=None, running_mean=None, running_var=None,
                   training=False, momentum=0.9, eps=1e-05):
        if not training or weight is None or bias is None or running_mean is None or running_var is None:
            return torchlib.aten__native_batch_norm_legit_functional(
                input, weight, bias, running_mean, running_var, training, momentum, eps)
        norm, new_mean, new_var = op.BatchNormalization(
            input, weight, bias, running_mean, running_var, epsilon=eps,
            momentum=1.0 - momentum, training_mode=True)
        # save_mean / save_invstd feed only autograd, which the graph does not hold.
        return norm, op.Identity(new_mean), op.Identity(new_var), new_mean, new_var

    return {torch.ops.aten._native_batch_norm_legit_functional.default: batch_norm}


def optimize_keeping_parameters(path, param_names, large=False):
    """The onnxscript optimizer (what dynamo=True, optimize=True runs), with the parameters
    hidden from it. Shown their values, it treats parameters as constants: it folds
    Transpose(weight) into a new initializer (so a tied embedding and LM head become two
    tensors), drops a Gemm's all-zero bias, and deduplicates initializers of equal value
    (every fresh zero bias, every unit LayerNorm scale, becomes one). Here each parameter is
    a graph input while the optimizer runs, and an initializer again afterwards; constants
    are still folded, lifted to initializers and deduplicated."""
    import onnx_ir as ir
    import onnxscript.optimizer

    model = ir.load(path)
    g = model.graph
    held = {}
    for name in [n for n in g.initializers if n in param_names]:
        v = g.initializers.pop(name)
        held[name] = v.const_value
        v.const_value = None
        g.inputs.append(v)
    onnxscript.optimizer.optimize(model)
    for name, tensor in held.items():
        v = next(x for x in g.inputs if x.name == name)
        g.inputs.remove(v)
        v.const_value = tensor
        g.register_initializer(v)
    if large:
        ir.save(model, path, external_data=os.path.basename(path) + ".data")
    else:
        ir.save(model, path)


# ----------------------------------------------------------------------------- metadata

def _norm(name):
    return re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_")


def parameter_map(onnx_model, module, prefix="model."):
    """({initializer: [FQN, ...]}, [[FQN, ...] tied], {initializer: [FQN] transposed}, notes).

    FQNs are the module's own (the wrapper's prefix removed). An initializer is matched to a
    parameter by name where the exporter kept it (its value must be equal), else by exact
    value equality with the same shape (several parameters of one value, merged by the
    exporter, all map to the initializer that survived), else as a transposed copy."""
    from onnx import numpy_helper, TensorProto

    floats = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}
    groups, objs = {}, {}
    for name, p in module.named_parameters(remove_duplicate=False):
        if p.requires_grad:
            groups.setdefault(id(p), []).append(name)
            objs[id(p)] = p
    tied = [names for names in groups.values() if len(names) > 1]
    inits = {}
    for t in onnx_model.graph.initializer:
        if t.data_type in floats:
            inits[t.name] = numpy_helper.to_array(t)
    by_norm = {}
    for pid, names in groups.items():
        for n in names:
            by_norm[_norm(n)] = pid
    pre = _norm(prefix)
    holder, how, notes = {}, {}, []

    def label(pid):
        n = groups[pid][0]
        return n[len(prefix):] if n.startswith(prefix) else n

    def value(pid):
        return objs[pid].detach().cpu().numpy()

    for iname, arr in inits.items():
        k = _norm(iname)
        cands = [k]
        for lead in ("p_" + pre + "_", pre + "_", "p_"):
            if k.startswith(lead):
                cands.append(k[len(lead):])
        for c in cands:
            pid = by_norm.get(c)
            if pid is None or pid in holder:
                continue
            v = value(pid)
            if arr.shape == v.shape and np.array_equal(arr, v.astype(arr.dtype)):
                holder[pid], how[pid] = iname, "name"
                break
            notes.append(f"initializer {iname} is named like {label(pid)} but holds another value")
    claimed = set(holder.values())
    transposed = {}
    for pid, names in groups.items():
        if pid in holder:
            continue
        v = value(pid)
        exact = [n for n, a in inits.items()
                 if a.shape == v.shape and np.array_equal(a, v.astype(a.dtype))]
        free = [n for n in exact if n not in claimed]
        pick = free or exact
        if pick:
            if len(pick) > 1:
                notes.append(f"{label(pid)}: {len(pick)} initializers hold its value "
                             f"({', '.join(pick[:4])}...); took {pick[0]}")
            holder[pid], how[pid] = pick[0], "value"
            claimed.add(pick[0])
            continue
        if v.ndim == 2:
            tr = [n for n, a in inits.items() if a.shape == v.T.shape and np.array_equal(a, v.T.astype(a.dtype))]
            if tr:
                holder[pid], how[pid] = tr[0], "transposed"
                transposed.setdefault(tr[0], []).extend(names)
                claimed.add(tr[0])
                continue
        notes.append(f"{label(pid)} {tuple(v.shape)}: no initializer holds it (the exporter dropped it or folded it into another "
                     "tensor; or it is a Constant node)")
    # Second copies: an unclaimed initializer equal to a parameter that is already held, or
    # to its transpose (an optimizer folded Transpose(weight)). Only for parameters that are
    # not all one value, which a constant of that shape could equal by chance.
    extra = {}
    for iname, arr in inits.items():
        if iname in claimed or arr.ndim != 2:
            continue
        for pid, names in groups.items():
            v = value(pid)
            if v.ndim != 2 or v.size < 2 or np.all(v == v.flat[0]):
                continue
            if arr.shape == v.shape and np.array_equal(arr, v.astype(arr.dtype)):
                extra.setdefault(iname, []).extend(names)
                notes.append(f"{iname} is a second copy of {label(pid)}")
            elif arr.shape == v.T.shape and np.array_equal(arr, v.T.astype(arr.dtype)):
                extra.setdefault(iname, []).extend(names)
                transposed.setdefault(iname, []).extend(names)
                notes.append(f"{iname} holds {label(pid)} transposed, beside {holder.get(pid, '?')} "
                             "(an optimizer folded Transpose(weight); the dynamo recipe's "
                             "--optimize safe avoids it)")
            else:
                continue
            claimed.add(iname)
            break
    params = {}
    for iname, names in extra.items():
        params[iname] = [n[len(prefix):] if n.startswith(prefix) else n for n in names]
    for pid, names in groups.items():
        if pid in holder:
            params.setdefault(holder[pid], []).extend(n[len(prefix):] if n.startswith(prefix) else n
                                                      for n in names)
    strip = lambda n: n[len(prefix):] if n.startswith(prefix) else n  # noqa: E731
    tied = [[strip(n) for n in names] for names in tied]
    transposed = {k: [strip(n) for n in v] for k, v in transposed.items()}
    # keep the graph's initializer order
    order = [t.name for t in onnx_model.graph.initializer]
    params = {k: params[k] for k in order if k in params}
    return params, tied, transposed, notes, how


def set_metadata(onnx_model, entries):
    keep = [p for p in onnx_model.metadata_props if p.key not in entries]
    del onnx_model.metadata_props[:]
    onnx_model.metadata_props.extend(keep)
    for k, v in entries.items():
        e = onnx_model.metadata_props.add()
        e.key, e.value = k, v


# ----------------------------------------------------------------------------- check

def has_batchnorm(module):
    return any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in module.modules())


def check_onnxruntime(path, wrapper, args, shapes):
    """Largest |logits(ORT) - logits(torch)| at each (batch, seq). The torch side runs a copy in
    eval mode, or in train mode where BatchNorm needs batch statistics (dropout must be 0)."""
    import onnxruntime as ort

    # onnxruntime's graph optimizations off: they are not what is checked, and at opset 20
    # they change a training-mode BatchNormalization's result (0.05 on mobilenetv3 with
    # onnxruntime 1.32) where the unoptimized graph and onnx.reference agree with torch.
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    results = []
    for batch, seq in shapes:
        inputs = example_inputs(args, batch, seq, seed=7 + batch + seq)
        ref_mod = copy.deepcopy(wrapper)
        ref_mod.train(has_batchnorm(ref_mod))
        with torch.no_grad():
            ref = ref_mod(*inputs.values()).float().numpy()
        feeds = {n: inputs[n].numpy() for n in names}
        got = sess.run(["logits"], feeds)[0]
        if got.shape != ref.shape:
            results.append((batch, seq, f"shape {got.shape} vs torch {ref.shape}"))
        else:
            results.append((batch, seq, float(np.max(np.abs(got - ref)))))
    return results


# ----------------------------------------------------------------------------- weights

def save_weights(module, stem, recipe):
    state = {k: v.detach().cpu().contiguous().clone() for k, v in module.state_dict().items()}
    try:
        from safetensors.torch import save_file

        path = stem + ".safetensors"
        save_file(state, path, metadata={"onnxpipe.export": json.dumps(recipe)})
    except ImportError:
        path = stem + ".npz"
        np.savez(path, **{k: v.numpy() for k, v in state.items()})
    return path


def load_weights(path):
    if path.endswith(".safetensors"):
        from safetensors.torch import load_file

        return load_file(path)
    with np.load(path) as z:
        return {k: torch.from_numpy(z[k]) for k in z.files}


def rebuild(path, weights=None):
    """The PyTorch module an export was made from, with its initial weights: `path` is the
    .onnx (its onnxpipe.export metadata) or the recipe .json written beside it."""
    if path.endswith(".onnx"):
        import onnx

        m = onnx.load(path, load_external_data=False)
        recipe = json.loads({p.key: p.value for p in m.metadata_props}["onnxpipe.export"])
    else:
        with open(path) as f:
            recipe = json.load(f)
    args = parser().parse_args(recipe["argv"])
    finish_args(args)
    module, _ = build_module(args)
    stem = os.path.splitext(path)[0]
    if weights is None:
        for ext in (".safetensors", ".npz"):
            if os.path.exists(stem + ext):
                weights = stem + ext
    if weights:
        module.load_state_dict(load_weights(weights))
    return module


# ----------------------------------------------------------------------------- main

def parser():
    ap = argparse.ArgumentParser(
        description="Export a HuggingFace transformers or timm model to ONNX for training with onnxpipe.")
    ap.add_argument("--model", required=True,
                    help=f"{', '.join(HF_MODELS)}, or a timm model name (resnet50, "
                         "mobilenetv3_small_050, efficientnet_b0, vit_tiny_patch16_224, ...)")
    ap.add_argument("--exporter", choices=("torchscript", "dynamo"), default="torchscript")
    ap.add_argument("--opset", type=int, default=None,
                    help="opset (default: 17 for torchscript, the exporter's own for dynamo)")
    ap.add_argument("-o", "--output", required=True, help="the .onnx file to write")
    ap.add_argument("--layers", type=int, default=None, help="transformer layers (default 2)")
    ap.add_argument("--d-model", type=int, default=None, help="hidden size (default 64)")
    ap.add_argument("--heads", type=int, default=None, help="attention heads (default 4)")
    ap.add_argument("--kv-heads", type=int, default=None, help="key/value heads (Llama family; default = heads)")
    ap.add_argument("--ffn", type=int, default=None, help="feed-forward size (default 4 x d-model)")
    ap.add_argument("--vocab", type=int, default=128)
    ap.add_argument("--seq", type=int, default=32, help="sequence length of the example input")
    ap.add_argument("--max-positions", type=int, default=None,
                    help="max_position_embeddings (default --seq); the dynamic seq axis is bounded by it")
    ap.add_argument("--batch", type=int, default=2, help="batch of the example input")
    ap.add_argument("--num-classes", type=int, default=10, help="classes (classifiers)")
    ap.add_argument("--image-size", type=int, default=None,
                    help="image side (default 32 for ViTs, 64 for CNNs)")
    ap.add_argument("--patch-size", type=int, default=8, help="ViT patch size")
    ap.add_argument("--dropout", type=float, default=0.0,
                    help="every dropout probability of the config (default 0: deterministic)")
    tie = ap.add_mutually_exclusive_group()
    tie.add_argument("--tie", dest="tie", action="store_true", default=None,
                     help="tie_word_embeddings=True (GPT-2's default)")
    tie.add_argument("--no-tie", dest="tie", action="store_false")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="any other config field (HF) or timm.create_model keyword; repeatable")
    ap.add_argument("--attention-mask", nargs="?", const="2d", choices=("2d", "4d"), default=None,
                    help="text models: an attention_mask input, 1 = attend: 2d (default) a [batch, seq] "
                         "padding mask; 4d a [batch, 1, seq, seq] mask, e.g. the block-diagonal causal mask "
                         "of packed documents (onnxpipe train --pack)")
    ap.add_argument("--position-ids", action="store_true",
                    help="text models: a position_ids [batch, seq] input (--pack restarts them per document)")
    ap.add_argument("--attn-implementation", default="eager",
                    help="HF attention implementation (default eager: plain MatMul/Softmax)")
    ap.add_argument("--static", action="store_true", help="fixed batch and sequence axes")
    ap.add_argument("--packed-sequences", action="store_true",
                    help="HF decoders without --attention-mask: keep transformers' packed-sequence "
                         "detection in the graph (torch.diff + cumsum over position_ids; the "
                         "TorchScript exporter cannot export it)")
    ap.add_argument("--optimize", choices=("safe", "full", "none"), default="safe",
                    help="dynamo: the onnxscript optimizer with the parameters hidden from it "
                         "(safe, default), as torch runs it (full: merges, drops and transposes "
                         "parameters), or none (Constant nodes, SplitToSequence, CastLike stay)")
    ap.add_argument("--eval-batchnorm", action="store_true",
                    help="dynamo: keep the exporter's own BatchNorm translation (running statistics, "
                         "as in eval mode) instead of training_mode=1")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save-weights", action="store_true",
                    help="also write the initial state_dict as <output>.safetensors and the recipe as <output>.json")
    ap.add_argument("--no-check", dest="check", action="store_false",
                    help="skip the onnxruntime comparison")
    return ap


def finish_args(args):
    vit = args.model == "hf-vit" or args.model.startswith(("vit", "deit"))
    args.layers_given = args.layers is not None
    args.d_model_given = args.d_model is not None
    args.heads_given = args.heads is not None
    args.layers = args.layers or 2
    args.d_model = args.d_model or 64
    args.heads = args.heads or 4
    if args.image_size is None:
        args.image_size = 32 if vit else 64
    sets = []
    for s in args.set:
        if "=" not in s:
            sys.exit(f"export_model: --set {s!r}: expected KEY=VALUE")
        k, v = s.split("=", 1)
        sets.append((k, parse_value(v)))
    args.set = sets


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    finish_args(args)
    t0 = time.time()
    module, config = build_module(args)
    kind = kind_of(args.model)
    if (args.attention_mask or args.position_ids) and kind not in TEXT_KINDS:
        sys.exit("export_model: --attention-mask and --position-ids are for text models")
    if args.position_ids and not args.attention_mask:
        sys.exit("export_model: --position-ids goes with --attention-mask (4d for packed documents), the model's "
                 "inputs being input_ids, attention_mask, position_ids in that order")
    wrapper = LogitsOnly(module, kind, args.model)
    wrapper.train()
    inputs = example_inputs(args, args.batch, args.seq)
    out = args.output
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    # The export must not change the weights a test starts from (BatchNorm's running stats
    # move in a train-mode trace): export a copy, keep `module` as built.
    export_wrapper = copy.deepcopy(wrapper)
    with no_packed_sequence_detection(args):
        if args.exporter == "torchscript":
            export_torchscript(export_wrapper, inputs, out, args)
        else:
            export_dynamo(export_wrapper, inputs, out, args)
    t_export = time.time() - t0

    import onnx

    m = onnx.load(out)
    params, tied, transposed, notes, how = parameter_map(m, wrapper)
    # Parameter values the exporter saw are those of `wrapper` (deep copies), so the map holds.
    total = sum(p.numel() for p in module.parameters())
    mapped = 0
    sizes = {t.name: int(np.prod(t.dims)) for t in m.graph.initializer}
    for k in params:
        mapped += sizes[k]
    recipe = {
        "argv": [a for a in argv],
        "model": args.model, "exporter": args.exporter,
        "opset": next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), None),
        "config": config,
        "inputs": {k: {"dtype": str(v.dtype).replace("torch.", ""), "shape": list(v.shape)}
                   for k, v in inputs.items()},
        "output": "logits", "kind": kind, "seed": args.seed,
        "pytorch_numel": total,
        "versions": versions(),
    }
    meta = {
        "onnxpipe.parameters": json.dumps(params),
        "onnxpipe.tied": json.dumps(tied),
        "onnxpipe.export": json.dumps(recipe, default=str),
    }
    if transposed:
        meta["onnxpipe.transposed"] = json.dumps(transposed)
    set_metadata(m, meta)
    save_onnx(m, out, is_large(wrapper))

    merged = {k: v for k, v in params.items() if len(v) > 1}
    print(f"{out}: {args.model} via {args.exporter}, opset {recipe['opset']}, "
          f"{len(m.graph.node)} nodes, {len(m.graph.initializer)} initializers "
          f"({len(params)} hold parameters), export {t_export:.1f} s")
    print(f"  parameters: {mapped} elements in the initializers the metadata names; "
          f"PyTorch's sum(p.numel()) = {total}" + ("" if mapped == total else "  <-- differ"))
    for names in tied:
        print(f"  tied by PyTorch: {' = '.join(names)}")
    for k, v in merged.items():
        if any(set(v) == set(t) for t in tied):
            continue
        print(f"  merged by the exporter: {k} holds {len(v)} parameters: {', '.join(v[:6])}"
              + (" ..." if len(v) > 6 else ""))
    for k, v in transposed.items():
        print(f"  transposed: {k} holds {', '.join(v)} transposed")
    for n in notes:
        print(f"  note: {n}")
    if args.save_weights:
        stem = os.path.splitext(out)[0]
        wpath = save_weights(module, stem, recipe)
        with open(stem + ".json", "w") as f:
            json.dump(recipe, f, indent=1, default=str)
        print(f"  weights: {wpath}, recipe: {stem}.json")
    if args.check:
        shapes = [(args.batch, args.seq)]
        if not args.static:
            shapes.append((args.batch + 1, max(2, args.seq // 2) if kind in TEXT_KINDS else args.seq))
        try:
            for b, s, d in check_onnxruntime(out, wrapper, args, shapes):
                where = f"batch {b}, seq {s}" if kind in TEXT_KINDS else f"batch {b}"
                print(f"  onnxruntime vs torch ({where}): max |diff| = {d if isinstance(d, str) else f'{d:.3g}'}")
        except Exception as e:  # noqa: BLE001 (report and go on: the file is written)
            print(f"  onnxruntime check failed: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
            return 2
    return 0


def versions():
    import importlib.metadata as md

    out = {}
    for p in ("torch", "transformers", "timm", "onnxscript", "onnx", "onnxruntime"):
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            pass
    return out


if __name__ == "__main__":
    sys.exit(main())
