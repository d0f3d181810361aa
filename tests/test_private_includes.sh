#!/usr/bin/env bash
# A library file reaches only its own module's private headers: every quoted #include of a
# file under a module folder names a header in that folder (kernels/cpu and kernels/cuda
# also kernels/, being parts of the kernels module) or a generated one, never a path with
# a '/' ("cpu/window.h", "../stage/x.h"). Headers modules share live in internal/onnxpipe/
# and are included as <onnxpipe/x.h>. The build enforces the same (CMakeLists.txt:
# pp_module_includes); this names the offending line.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}"
modules="core graph partitioner scheduler driver stage comm kernels kernels/cpu kernels/cuda ckpt planner train"
checked=0 bad=0
for m in $modules; do
    for f in "$SRC_DIR/$m"/*.c "$SRC_DIR/$m"/*.h "$SRC_DIR/$m"/*.cu "$SRC_DIR/$m"/*.cuh; do
        [ -f "$f" ] || continue
        while IFS=: read -r line h; do
            checked=$((checked + 1))
            if [[ "$h" == */* ]]; then
                echo "FAIL: ${f#"$SRC_DIR"/}:$line includes \"$h\": a path into another folder"; bad=1
            elif [ -f "$SRC_DIR/$m/$h" ] || { [[ "$m" == kernels/* ]] && [ -f "$SRC_DIR/kernels/$h" ]; } ||
                 [ -f "$BUILD_DIR/gen/$h" ] || [[ "$h" == *.pb-c.h ]]; then
                :
            else
                echo "FAIL: ${f#"$SRC_DIR"/}:$line includes \"$h\", not a header of $m/ (shared ones: internal/onnxpipe/)"; bad=1
            fi
        done < <(grep -n '^#include "' "$f" | sed 's/^\([0-9]*\):#include "\([^"]*\)".*/\1:\2/')
    done
done
echo "checked $checked quoted includes in $(echo $modules | wc -w) module folders"
[ "$bad" = 0 ] && echo "ok: every library file includes only its own module's private headers"
exit "$bad"
