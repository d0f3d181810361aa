#!/usr/bin/env bash
# `cmake --install` gives a user what docs/library.md promises: libonnxpipe.so (SONAME, version)
# and .a, the headers, the CLI, the CMake package and onnxpipe.pc; the public and backend
# header tiers and no internal header, each installed header compiling on its own against
# the prefix; a program outside the
# tree builds with each (shared and static) and runs; examples/ builds from the prefix alone
# (find_package and pkg-config) and pipeline_trainer trains under mpirun. Then the .deb
# installs and removes cleanly.
set -euo pipefail
: "${BUILD_DIR:?}" "${SRC_DIR:?}"
OUT="$BUILD_DIR/test-out/install"
P="$OUT/prefix"
rm -rf "$OUT"
mkdir -p "$OUT"
fail() { echo "FAIL: $*"; exit 1; }
version=$(sed -n 's/^#define ONNXPIPE_VERSION_STRING "\(.*\)"/\1/p' "$BUILD_DIR/gen/onnxpipe/version.h")
major=${version%%.*}

echo "--- cmake --install $BUILD_DIR --prefix $P"
cmake --install "$BUILD_DIR" --prefix "$P" >"$OUT/install.log" || { cat "$OUT/install.log"; fail "cmake --install"; }
libdir=$(dirname "$(find "$P" -name "libonnxpipe.so.$version" | head -1)")
[ -d "$libdir" ] || fail "no libonnxpipe.so.$version under $P"
for f in "$libdir/libonnxpipe.so" "$libdir/libonnxpipe.so.$major" "$libdir/libonnxpipe.a" \
         "$P/include/onnxpipe/onnxpipe.h" "$P/include/onnxpipe/version.h" "$P/bin/onnxpipe" \
         "$libdir/cmake/onnxpipe/onnxpipeConfig.cmake" "$libdir/cmake/onnxpipe/onnxpipeConfigVersion.cmake" \
         "$libdir/pkgconfig/onnxpipe.pc"; do
    [ -e "$f" ] || fail "not installed: ${f#$P/}"
done
soname=$(readelf -d "$libdir/libonnxpipe.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libonnxpipe.so.$major" ] || fail "SONAME is '$soname', expected libonnxpipe.so.$major"
[ "$(readlink "$libdir/libonnxpipe.so")" = "libonnxpipe.so.$major" ] || fail "libonnxpipe.so does not point at the SONAME"
"$P/bin/onnxpipe" --version | grep -qx "onnxpipe $version" || fail "installed onnxpipe --version does not print $version"
echo "ok: $(cd "$P" && find . -type f -o -type l | wc -l) files; SONAME $soname; onnxpipe --version = $version"

# the tiers (docs/library.md: ABI): include/onnxpipe and include/onnxpipe/backend, nothing of internal/
[ -d "$P/include/onnxpipe/backend" ] || fail "not installed: include/onnxpipe/backend (the backend tier)"
for h in "$SRC_DIR"/internal/onnxpipe/*.h; do
    [ -z "$(find "$P" -name "$(basename "$h")")" ] || fail "internal header installed: $(find "$P" -name "$(basename "$h")")"
done
# every installed header alone (the first include of a file), C11 -Werror, with the prefix
# only on the path: it includes what it needs, and only headers that are installed
n=0
for h in $(cd "$P/include" && find onnxpipe -name '*.h' | sort); do
    printf '#include <%s>\nint main(void) { return 0; }\n' "$h" >"$OUT/alone.c"
    cc -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$P/include" "$OUT/alone.c" 2>"$OUT/alone.log" ||
        { cat "$OUT/alone.log"; fail "$h does not compile on its own against the installed tree"; }
    n=$((n + 1))
done
echo "ok: $n installed headers ($(ls "$P/include/onnxpipe/backend" | wc -l) backend) each compile alone;" \
     "none of the $(ls "$SRC_DIR"/internal/onnxpipe/*.h | wc -l) internal headers installed"

# the user's program lives outside the tree: no source include path can leak in
mkdir -p "$OUT/user"
cp "$SRC_DIR/tests/install_user.c" "$OUT/user/user.c"
run_user() {   # name, binary, expect shared (1) or not (0)
    # grep reads all of ldd's output (no -q): under pipefail an early exit would make ldd's
    # SIGPIPE fail the pipeline, and a shared build look static
    if ldd "$2" | grep "libonnxpipe.so.$major => $libdir/" >/dev/null; then linked=1; else linked=0; fi
    [ "$linked" = "$3" ] || fail "$1: linked to libonnxpipe.so: $linked, expected $3 ($(ldd "$2" | grep onnxpipe || echo none))"
    "$2" >"$OUT/$1.log" 2>&1 || { cat "$OUT/$1.log"; fail "$1 failed"; }
    echo "ok: $1: $(tail -1 "$OUT/$1.log")"
}

echo "--- find_package(onnxpipe) with CMAKE_PREFIX_PATH=$P"
cat >"$OUT/user/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(install_user C)
find_package(onnxpipe 0.1 REQUIRED)
add_executable(user_shared user.c)
target_link_libraries(user_shared PRIVATE onnxpipe::onnxpipe)
add_executable(user_static user.c)
target_link_libraries(user_static PRIVATE onnxpipe::onnxpipe_static)
CMAKE
cmake -S "$OUT/user" -B "$OUT/user/build" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
      >"$OUT/cmake-user.log" 2>&1 || { cat "$OUT/cmake-user.log"; fail "find_package(onnxpipe) failed"; }
cmake --build "$OUT/user/build" >>"$OUT/cmake-user.log" 2>&1 || { cat "$OUT/cmake-user.log"; fail "the CMake user does not build"; }
! grep -q "$SRC_DIR/include" "$OUT/user/build/compile_commands.json" || fail "the CMake user compiled with the source tree's headers"
run_user cmake-shared "$OUT/user/build/user_shared" 1
run_user cmake-static "$OUT/user/build/user_static" 0

echo "--- pkg-config onnxpipe with PKG_CONFIG_PATH=$libdir/pkgconfig"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
pkg-config --modversion onnxpipe | grep -qx "$version" || fail "pkg-config --modversion is not $version"
cc -o "$OUT/user/pc_shared" "$OUT/user/user.c" $(pkg-config --cflags --libs onnxpipe) -Wl,-rpath,"$libdir" \
    || fail "cc \$(pkg-config --cflags --libs onnxpipe) does not build the user"
run_user pkgconfig-shared "$OUT/user/pc_shared" 1
# static: the archive by name, then what --static adds (Libs.private)
cc -o "$OUT/user/pc_static" "$OUT/user/user.c" $(pkg-config --cflags onnxpipe) \
    $(pkg-config --static --libs onnxpipe | sed 's/-lonnxpipe/-l:libonnxpipe.a/') \
    || fail "cc with pkg-config --static --libs does not build the user against libonnxpipe.a"
run_user pkgconfig-static "$OUT/user/pc_static" 0

echo "--- examples/ from the installed package alone; pipeline_trainer under mpirun -np 4"
mkdir -p "$OUT/examples"   # a copy outside the tree: only the prefix can supply headers and libraries
cp "$SRC_DIR"/examples/CMakeLists.txt "$SRC_DIR"/examples/*.c "$OUT/examples/"
cmake -S "$OUT/examples" -B "$OUT/examples/build" -DCMAKE_PREFIX_PATH="$P" >"$OUT/examples.log" 2>&1 &&
    cmake --build "$OUT/examples/build" >>"$OUT/examples.log" 2>&1 || { cat "$OUT/examples.log"; fail "examples/ do not build from $P"; }
cc -o "$OUT/examples/pipeline_trainer_pc" "$OUT/examples/pipeline_trainer.c" $(pkg-config --cflags --libs onnxpipe) \
    -Wl,-rpath,"$libdir" || fail "cc \$(pkg-config ...) does not build examples/pipeline_trainer.c"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 PP_COMM_TIMEOUT=60
for bin in build/pipeline_trainer pipeline_trainer_pc; do
    timeout 300 mpirun --oversubscribe --bind-to none -np 4 -x OPENBLAS_NUM_THREADS -x PP_COMM_TIMEOUT \
        "$OUT/examples/$bin" 20 "$OUT/examples/ckpt-${bin##*/}" >"$OUT/examples-${bin##*/}.log" 2>&1 \
        || { cat "$OUT/examples-${bin##*/}.log"; fail "$bin under mpirun"; }
    grep -q '^loss .*: falls$' "$OUT/examples-${bin##*/}.log" || { cat "$OUT/examples-${bin##*/}.log"; fail "$bin: the loss does not fall"; }
    echo "ok: $bin (pp 2 x dp 2): $(grep '^loss ' "$OUT/examples-${bin##*/}.log")"
done
unset PKG_CONFIG_PATH

echo "--- cpack -G DEB"
cpack -G DEB --config "$BUILD_DIR/CPackConfig.cmake" -B "$OUT/deb" >"$OUT/cpack.log" 2>&1 \
    || { cat "$OUT/cpack.log"; fail "cpack -G DEB"; }
deb=$(ls "$OUT"/deb/onnxpipe_*.deb)
dpkg-deb -c "$deb" >"$OUT/deb.list"
for f in "./usr/lib/libonnxpipe.so.$version" ./usr/lib/libonnxpipe.a ./usr/include/onnxpipe/version.h \
         ./usr/bin/onnxpipe ./usr/lib/cmake/onnxpipe/onnxpipeConfig.cmake ./usr/lib/pkgconfig/onnxpipe.pc; do
    grep -q " $f\( \|$\)" "$OUT/deb.list" || fail "$(basename "$deb") lacks $f"
done
echo "ok: $(basename "$deb"), $(grep -vc '/$' "$OUT/deb.list") files"

if [ "$(id -u)" != 0 ] || ! command -v dpkg >/dev/null; then
    echo "skip: dpkg -i / dpkg -r need root and dpkg (the .deb was built and its contents checked)"
    exit 0
fi
# one install at a time on this machine: other trees run this test too
exec 9>/tmp/onnxpipe-deb-test.lock
flock 9
if dpkg-query -W -f='${Status}' onnxpipe 2>/dev/null | grep -q "install ok installed" ||
   [ -e /usr/bin/onnxpipe ] || [ -e /usr/lib/libonnxpipe.so ]; then
    echo "skip: onnxpipe is already installed in /usr on this machine; not replacing it"
    exit 0
fi
echo "--- dpkg -i $(basename "$deb")"
dpkg -i "$deb" >"$OUT/dpkg-i.log" 2>&1 || { cat "$OUT/dpkg-i.log"; dpkg -r onnxpipe >/dev/null 2>&1 || true; fail "dpkg -i"; }
status=0
(
    /usr/bin/onnxpipe --version | grep -qx "onnxpipe $version" || fail "/usr/bin/onnxpipe --version"
    cc -o "$OUT/user/deb_user" "$OUT/user/user.c" $(pkg-config --cflags --libs onnxpipe) || fail "building against the .deb"
    ldd "$OUT/user/deb_user" | grep -E "libonnxpipe.so.$major => (/usr)?/lib/" >/dev/null ||
        fail "the program does not find /usr/lib/libonnxpipe.so.$major"
    "$OUT/user/deb_user" >"$OUT/deb-user.log" || fail "the program built against the .deb failed"
    echo "ok: installed: onnxpipe --version, pkg-config, and a program run against /usr/lib/libonnxpipe.so.$major"
) || status=1
dpkg -r onnxpipe >"$OUT/dpkg-r.log" 2>&1 || { cat "$OUT/dpkg-r.log"; fail "dpkg -r"; }
for f in /usr/bin/onnxpipe /usr/lib/libonnxpipe.so /usr/lib/libonnxpipe.so.$major /usr/include/onnxpipe \
         /usr/lib/cmake/onnxpipe /usr/lib/pkgconfig/onnxpipe.pc; do
    [ ! -e "$f" ] || fail "left behind by dpkg -r: $f"
done
[ "$status" = 0 ] || exit 1
echo "ok: dpkg -r removed every file"
