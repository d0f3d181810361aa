#!/usr/bin/env bash
# C++ users: every public header compiles as C++17 on its own, and tests/cxx_user.cpp, a
# small trainer on trainer.h, compiles to an object whose references to the library are
# C symbols (the headers' extern "C"), so it links against libonnxpipe.a. Skips (77)
# without g++.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}"
CXX=${CXX:-g++}
command -v "$CXX" >/dev/null || { echo "skip: no C++ compiler ($CXX; apt-get install g++)"; exit 77; }
OUT=$BUILD_DIR/test-out/cxx_headers
rm -rf "$OUT"
mkdir -p "$OUT"
flags=(-std=c++17 -Wall -Wextra -Werror -I"$SRC_DIR/include" -I"$BUILD_DIR/gen")
fail=0
for h in "$SRC_DIR"/include/onnxpipe/*.h; do
    n=$(basename "$h")
    if ! echo "#include <onnxpipe/$n>" | "$CXX" -x c++ "${flags[@]}" -fsyntax-only - 2>"$OUT/$n.log"; then
        echo "FAIL: <onnxpipe/$n> does not compile as C++17:"
        head -20 "$OUT/$n.log" | sed 's/^/  /'
        fail=1
    fi
done
echo "$(ls "$SRC_DIR"/include/onnxpipe/*.h | wc -l) headers compile as C++17 on their own"
if ! "$CXX" "${flags[@]}" -c "$SRC_DIR/tests/cxx_user.cpp" -o "$OUT/cxx_user.o" 2>"$OUT/cxx_user.log"; then
    echo "FAIL: tests/cxx_user.cpp does not compile:"
    sed 's/^/  /' "$OUT/cxx_user.log"
    exit 1
fi
# C++ names of ours are mangled _Z<len>pp_...: a header without extern "C" shows here
nm -u "$OUT/cxx_user.o" | awk '{ print $NF }' >"$OUT/undefined"
if grep -E '^_Z[0-9]+pp_' "$OUT/undefined" >"$OUT/mangled"; then
    echo "FAIL: tests/cxx_user.cpp references library functions as C++ (extern \"C\" missing):"
    sed 's/^/  /' "$OUT/mangled"
    fail=1
fi
n=$(grep -c '^pp_' "$OUT/undefined" || true)
[ "$n" -ge 10 ] || { echo "FAIL: expected the example's 10+ pp_ calls as C symbols, found $n"; fail=1; }
[ "$fail" = 0 ] && echo "ok: tests/cxx_user.cpp compiles and calls $n pp_ functions as C symbols"
exit "$fail"
