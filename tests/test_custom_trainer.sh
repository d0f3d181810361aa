#!/usr/bin/env bash
# The library used directly (examples/custom_trainer.c): a trainer that feeds its own
# data to a stage must see its loss fall.
set -euo pipefail
: "${BUILD_DIR:?}"
"$BUILD_DIR/example_custom_trainer" 200
