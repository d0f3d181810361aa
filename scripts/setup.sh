#!/usr/bin/env bash
# Installs what onnxpipe needs on Debian 12, idempotently: the build dependencies
# from Debian, and a Python venv (sees Debian's torch; onnx, onnxruntime, safetensors and
# tensorboard from pip) for the reference tests (safetensors: checkpoint shards read back
# by its reader; tensorboard: --logdir event files), and the export recipes' venv
# (scripts/export-venv.sh: torch 2.x, transformers, timm, tokenizers, sentencepiece, datasets,
# megatron-core; test_zoo_ref_mpi, test_data_formats, test_data_tokenize). Safe to run
# again; does nothing when all is present.
set -euo pipefail

debs=(build-essential cmake pkg-config libprotobuf-c-dev protobuf-c-compiler libonnx-dev
      libopenmpi-dev openmpi-bin libhwloc-dev libcmocka-dev libopenblas-dev
      python3-venv python3-torch python3-torchvision iproute2)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

venv=${ONNXPIPE_VENV:-$HOME/.cache/onnxpipe/venv}
if ! "$venv/bin/python" -c "import torch, onnx, onnxruntime, safetensors" 2>/dev/null; then
  echo "setup: creating the Python venv at $venv"
  mkdir -p "$(dirname "$venv")"
  [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check onnx onnxruntime safetensors
  "$venv/bin/python" -c "import torch, onnx, onnxruntime, safetensors"
fi
# tensorboard reads back the event files of --logdir (test_train_tensorboard_mpi)
if ! "$venv/bin/python" -c "import tensorboard" 2>/dev/null; then
  echo "setup: installing tensorboard into $venv"
  "$venv/bin/pip" install -q --disable-pip-version-check tensorboard
fi
# the export recipes' own venv (torch 2.x, transformers, timm, onnxscript): test_zoo_ref_mpi
"$(dirname "$0")/export-venv.sh" >/dev/null
