#!/usr/bin/env bash
# The export recipes' own Python venv (~/.cache/onnxpipe/export-venv, or
# ONNXPIPE_EXPORT_VENV): PyTorch 2.x with both ONNX exporters (the TorchScript one,
# dynamo=False, and the dynamo one, which needs onnxscript), HuggingFace transformers,
# timm, onnx, onnxruntime and numpy: what examples/export/export_model.py and the zoo
# test need; tokenizers, sentencepiece and datasets: examples/data/tokenize_data.py and its
# test; megatron-core (without its training dependencies): the indexed datasets. Kept apart
# from the test venv (scripts/setup.sh, which sees Debian's torch 1.13) and from the bench
# venv (onnxruntime-training pins an old onnxruntime).
# Idempotent: does nothing when the venv already imports what it needs; that check (about
# 9 s of importing torch and transformers) is made once per version of this script, which
# the tests call each time: a stamp in the venv remembers it. Prints where it is on the
# last line; what it installs, and the size, on stderr.
#
# torch: the CPU-only wheel from download.pytorch.org when that index answers (about
# 200 MB); otherwise PyPI's, which on Linux pulls the CUDA libraries too (about 3 GB;
# the recipes run it on the cpu all the same). transformers: the newest (5.x) when pip
# can install it beside that torch, else the newest 4.x.
set -euo pipefail
venv=${ONNXPIPE_EXPORT_VENV:-$HOME/.cache/onnxpipe/export-venv}
py=/usr/bin/python3
[ -x "$py" ] || py=python3

check() {
    "$venv/bin/python" - <<'EOF' 2>/dev/null
import onnx, numpy, onnxruntime, onnxscript, timm, safetensors  # noqa: F401
import torch, transformers  # noqa: F401
import tokenizers, sentencepiece, datasets  # noqa: F401
from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder  # noqa: F401
assert int(torch.__version__.split(".")[0]) >= 2, torch.__version__
assert int(transformers.__version__.split(".")[0]) >= 4, transformers.__version__
EOF
}

stamp=$venv/.onnxpipe-checked
sum=$(sha256sum "$0" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" = "$sum" ] && [ -x "$venv/bin/python" ]; then
    echo "$venv"
    exit 0
fi
if ! check; then
    echo "export-venv: setting up $venv (torch 2.x, transformers, timm, onnxscript, onnx, onnxruntime, tokenizers," \
         "sentencepiece, datasets, megatron-core)" >&2
    mkdir -p "$(dirname "$venv")"
    [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
    pip=("$venv/bin/pip" install -q --disable-pip-version-check)
    if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
        "${pip[@]}" --timeout 20 --retries 1 torch --index-url https://download.pytorch.org/whl/cpu >&2 2>/dev/null ||
            { echo "export-venv: download.pytorch.org does not answer; torch from PyPI (with its CUDA libraries)" >&2
              "${pip[@]}" torch >&2; }
    fi
    # Never let a later install swap the torch just installed (PyPI's would pull CUDA).
    tv=$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('torch').split('+')[0])")
    pin=$(mktemp); trap 'rm -f "$pin"' EXIT
    echo "torch==$tv" >"$pin"
    "${pip[@]}" -c "$pin" onnx onnxruntime onnxscript numpy safetensors timm tokenizers sentencepiece datasets >&2
    "${pip[@]}" -c "$pin" "transformers>=5" >&2 2>/dev/null ||
        { echo "export-venv: transformers 5.x does not install beside torch $tv; the newest 4.x" >&2
          "${pip[@]}" -c "$pin" "transformers<5" >&2; }
    # megatron-core writes and reads the indexed datasets of tests/test_data_formats.sh; its
    # datasets module needs only torch and numpy (the rest of its dependencies are for training)
    "${pip[@]}" --no-deps megatron-core >&2
    check || { echo "export-venv: $venv still cannot import torch 2.x, transformers, timm, onnxscript, onnx, onnxruntime," \
                    "tokenizers, sentencepiece, datasets and megatron-core" >&2; exit 1; }
    echo "export-venv: $venv takes $(du -sh "$venv" | cut -f1)" >&2
fi
echo "$sum" >"$stamp"
echo "$venv"
