#!/usr/bin/env bash
# The benchmarks' own Python venv (~/.cache/onnxpipe/bench-venv, or ONNXPIPE_BENCH_VENV):
# the current PyTorch 2.x and onnxruntime-training 1.19.2 from pip, the yardsticks a user
# would pick today (bench/peers.sh). Kept apart from the test venv (scripts/setup.sh),
# whose onnxruntime and Debian torch 1.13 conflict with them. Idempotent: does nothing
# when the venv already imports what it needs. Prints where it is on the last line.
#
# torch: the CPU-only wheel from download.pytorch.org when that index answers (about
# 200 MB); otherwise PyPI's, which on Linux pulls the CUDA libraries too (about 3 GB;
# the benchmarks run it on the cpu all the same). onnxruntime-training-cpu is the 9 MB
# CPU build of onnxruntime-training 1.19.2 (the package of that name is the 300 MB CUDA
# build) with the same on-device training API; it imports torch when loaded.
set -euo pipefail
venv=${ONNXPIPE_BENCH_VENV:-$HOME/.cache/onnxpipe/bench-venv}
ORT=1.19.2
py=/usr/bin/python3
[ -x "$py" ] || py=python3

check() {
    "$venv/bin/python" - "$ORT" <<'EOF' 2>/dev/null
import sys
import onnx, numpy  # noqa: F401
import torch
import onnxruntime
from onnxruntime.training import api, artifacts  # noqa: F401
from torch.distributed import pipelining  # noqa: F401
assert int(torch.__version__.split(".")[0]) >= 2, torch.__version__
assert onnxruntime.__version__ == sys.argv[1], onnxruntime.__version__
EOF
}

if ! check; then
    echo "bench-venv: setting up $venv (torch 2.x, onnxruntime-training-cpu $ORT, onnx)" >&2
    mkdir -p "$(dirname "$venv")"
    [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
    pip=("$venv/bin/pip" install -q --disable-pip-version-check)
    if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
        "${pip[@]}" --timeout 20 --retries 1 torch --index-url https://download.pytorch.org/whl/cpu >&2 2>/dev/null ||
            { echo "bench-venv: download.pytorch.org does not answer; torch from PyPI (with its CUDA libraries)" >&2
              "${pip[@]}" torch >&2; }
    fi
    "${pip[@]}" "onnxruntime-training-cpu==$ORT" onnx numpy >&2
    check || { echo "bench-venv: $venv still cannot import torch, onnxruntime.training $ORT and onnx" >&2; exit 1; }
    echo "bench-venv: $venv takes $(du -sh "$venv" | cut -f1)" >&2
fi
echo "$venv"
