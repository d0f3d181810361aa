#!/usr/bin/env bash
# libonnxpipe.a, the archive a user links, exports the public API and nothing else: every
# defined global symbol is a pp_ function a public header declares (PP_API), every function
# the headers declare that the library defines is exported, and a program with its own
# iter_next, value_bytes, shape_binary and load_tensor links against it and runs. The
# shared libonnxpipe.so, linked from the same object, exports exactly the same symbols.
set -euo pipefail
: "${BUILD_DIR:?}" "${SRC_DIR:?}"
LIB="$BUILD_DIR/libonnxpipe.a"
INTERNAL="$BUILD_DIR/libonnxpipe_internal.a"
OUT="$BUILD_DIR/test-out/symbols"
mkdir -p "$OUT"

globals() { nm -g --defined-only "$1" | awk 'NF == 3 { print $3 }' | sort -u; }
globals "$LIB" >"$OUT/exported"
echo "libonnxpipe.a: $(wc -l <"$OUT/exported") global symbols ($(globals "$INTERNAL" | wc -l) in libonnxpipe_internal.a)"

# functions the public headers declare: an identifier before '(' in code, not in comments
sed -e 's|/\*.*\*/||g' -e '/^ *\/\?\*/d' "$SRC_DIR"/include/onnxpipe/*.h |
    grep -o '\bpp_[a-z0-9_]*(' | tr -d '(' | sort -u >"$OUT/declared"

fail=0
if grep -v '^pp_' "$OUT/exported" >"$OUT/unprefixed"; then
    echo "FAIL: libonnxpipe.a exports symbols without the pp_ prefix:"
    sed 's/^/  /' "$OUT/unprefixed"
    fail=1
fi
if comm -23 "$OUT/exported" "$OUT/declared" | grep . >"$OUT/undeclared"; then
    echo "FAIL: libonnxpipe.a exports pp_ symbols no public header declares (internal: not PP_API):"
    sed 's/^/  /' "$OUT/undeclared"
    fail=1
fi
# declared and defined (in this build: the CUDA ones only with CUDA) but not exported
globals "$INTERNAL" | comm -12 - "$OUT/declared" | comm -23 - "$OUT/exported" >"$OUT/hidden" || true
if [ -s "$OUT/hidden" ]; then
    echo "FAIL: functions of the public headers that libonnxpipe.a does not export (PP_API missing?):"
    sed 's/^/  /' "$OUT/hidden"
    fail=1
fi
[ "$fail" = 0 ] && echo "ok: every exported symbol is a public pp_ function, and every public function is exported"

# the dynamic symbol table: what a program linked against the .so can bind to
nm -D --defined-only "$BUILD_DIR/libonnxpipe.so" | awk 'NF == 3 { print $3 }' | sort -u >"$OUT/exported_so"
echo "libonnxpipe.so: $(wc -l <"$OUT/exported_so") dynamic symbols"
if ! diff "$OUT/exported" "$OUT/exported_so" >"$OUT/so_diff"; then
    echo "FAIL: libonnxpipe.so does not export the same symbols as libonnxpipe.a ('<' only the .a, '>' only the .so):"
    sed 's/^/  /' "$OUT/so_diff"
    fail=1
else
    echo "ok: libonnxpipe.so exports the same $(wc -l <"$OUT/exported_so") pp_ symbols as libonnxpipe.a"
fi

# the link is the check: a clash is "multiple definition of 'iter_next'"
echo "--- linking symbols_user (its own iter_next, value_bytes, shape_binary, load_tensor)"
if ! cmake --build "$BUILD_DIR" --target symbols_user >"$OUT/link.log" 2>&1; then
    echo "FAIL: a program with its own iter_next etc. does not link against libonnxpipe.a:"
    grep -iE 'multiple definition|error' "$OUT/link.log" | head -20 | sed 's/^/  /'
    exit 1
fi
"$BUILD_DIR/symbols_user" "$OUT/gpt.onnx"
exit "$fail"
