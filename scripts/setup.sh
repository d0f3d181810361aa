#!/usr/bin/env bash
# Installs what onnxpipe needs on Debian 12, idempotently, and says what it installs and
# how big:
#   setup.sh          the build's Debian packages (compiler, CMake, protobuf-c, the ONNX
#                     schema, Open MPI, hwloc, cmocka, OpenBLAS): all that `make run` needs;
#                     no Python package
#   setup.sh --tests  and what the tests need (`make test`): Debian's PyTorch and iproute2
#                     (network namespaces: test_multihost_mpi), the test venv
#                     (~/.cache/onnxpipe/venv, or ONNXPIPE_VENV: sees Debian's torch;
#                     onnx, onnxruntime, safetensors and tensorboard from pip) and the export
#                     recipes' venv (scripts/export-venv.sh: torch 2.x, transformers, timm, ...;
#                     test_zoo_ref_mpi, test_rope_fuse, the data tests).
# Does nothing when all is present.
set -euo pipefail

debs=(build-essential cmake pkg-config libprotobuf-c-dev protobuf-c-compiler libonnx-dev
      libopenmpi-dev openmpi-bin libhwloc-dev libcmocka-dev libopenblas-dev)
tests=0
case ${1:-} in
--tests) tests=1; debs+=(python3-venv python3-torch python3-torchvision iproute2) ;;
"") ;;
*) echo "usage: $0 [--tests]" >&2; exit 2 ;;
esac

missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing from Debian: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  # apt's own lines say how much it downloads and how much disk it takes
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}" |
    { grep -E "^(Need to get|After this operation)" || true; } | sed 's/^/setup: /'
fi
[ $tests = 1 ] || exit 0

venv=${ONNXPIPE_VENV:-$HOME/.cache/onnxpipe/venv}
if ! "$venv/bin/python" -c "import torch, onnx, onnxruntime, safetensors, tensorboard" 2>/dev/null; then
  echo "setup: the test venv at $venv (sees Debian's torch): onnx, onnxruntime, safetensors, tensorboard from PyPI"
  mkdir -p "$(dirname "$venv")"
  [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check onnx onnxruntime safetensors tensorboard
  "$venv/bin/python" -c "import torch, onnx, onnxruntime, safetensors, tensorboard"
  echo "setup: $venv takes $(du -sh "$venv" | cut -f1)"
fi
"$(dirname "$0")/export-venv.sh" >/dev/null
