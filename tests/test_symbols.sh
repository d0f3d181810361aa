#!/usr/bin/env bash
# libonnxpipe.a, the archive a user links, exports the public API and nothing else: every
# defined global symbol is a pp_ function a public header declares (PP_API), every function
# the headers declare that the library defines is exported, and a program with its own
# iter_next, value_bytes, shape_binary and load_tensor links against it and runs. The
# shared libonnxpipe.so, linked from the same object, exports exactly the same symbols.
# Both export exactly tests/symbols.allow ("symbol tier" a line; tier public for
# include/onnxpipe/*.h, backend for include/onnxpipe/backend/*.h): a symbol added to or
# dropped from the ABI fails here until the allowlist says so (docs/library.md: ABI). The public tier
# is capped: 200 public symbols or more fail.
set -euo pipefail
export LC_ALL=C
: "${BUILD_DIR:?}" "${SRC_DIR:?}"
LIB="$BUILD_DIR/libonnxpipe.a"
INTERNAL="$BUILD_DIR/libonnxpipe_internal.a"
OUT="$BUILD_DIR/test-out/symbols"
mkdir -p "$OUT"

globals() { nm -g --defined-only "$1" | awk 'NF == 3 { print $3 }' | sort -u; }
globals "$LIB" >"$OUT/exported"
echo "libonnxpipe.a: $(wc -l <"$OUT/exported") global symbols ($(globals "$INTERNAL" | wc -l) in libonnxpipe_internal.a)"

# functions a tier's headers declare: an identifier before '(' in code, not in comments
declared() { sed -e 's|/\*.*\*/||g' -e '/^ *\/\?\*/d' "$@" | grep -o '\bpp_[a-z0-9_]*(' | tr -d '(' | sort -u; }
declared "$SRC_DIR"/include/onnxpipe/*.h | sed 's/$/ public/' >"$OUT/tiers"
declared "$SRC_DIR"/include/onnxpipe/backend/*.h | sed 's/$/ backend/' >>"$OUT/tiers"
cut -d' ' -f1 "$OUT/tiers" | sort -u >"$OUT/declared"

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

# the committed allowlist: the exported set, each symbol with the tier of the header declaring it
ALLOW="$SRC_DIR/tests/symbols.allow"
# a build without CUDA compiles no pp_cuda_* and pp_nccl_*: the allowlist's lines this build
# does not define are left out (the CUDA build, which CI runs, checks them)
globals "$INTERNAL" >"$OUT/defined"
grep -v '^#' "$ALLOW" | sort -u | join - "$OUT/defined" >"$OUT/allow"
sort -u "$OUT/tiers" | join - "$OUT/exported" >"$OUT/exported_tiers"
if ! diff "$OUT/allow" "$OUT/exported_tiers" >"$OUT/allow_diff"; then
    echo "FAIL: the exported symbols (with their headers' tier) differ from tests/symbols.allow"
    echo "  ('<' only in the allowlist, '>' exported; a deliberate ABI change updates the allowlist):"
    sed 's/^/  /' "$OUT/allow_diff"
    fail=1
else
    echo "ok: libonnxpipe.a exports the $(wc -l <"$OUT/allow") symbols of tests/symbols.allow" \
         "($(grep -c ' public$' "$OUT/allow") public, $(grep -c ' backend$' "$OUT/allow") backend)"
fi

# the public tier is chosen, not left over (DESIGN.md): a custom trainer reads it in an hour,
# so it stays under PUBLIC_CAP symbols; growing past it means moving something inside first
PUBLIC_CAP=200
npublic=$(grep -v '^#' "$ALLOW" | grep -c ' public$' || true)
echo "public tier: $npublic symbols in tests/symbols.allow (cap: fewer than $PUBLIC_CAP)"
if [ "$npublic" -ge "$PUBLIC_CAP" ]; then
    echo "FAIL: the public tier has $npublic symbols, the cap is fewer than $PUBLIC_CAP: make something internal" \
         "(internal/onnxpipe/, no PP_API) before adding to include/onnxpipe/"
    fail=1
fi

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
