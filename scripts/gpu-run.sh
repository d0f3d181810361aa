#!/usr/bin/env bash
# The GPU bundle's launcher (scripts/gpu-bundle.sh copies it to <bundle>/root/run):
# `run CMD ARGS...` runs CMD with the bundle's libraries, its relocated Open MPI and PMIx,
# and the CUDA libraries of this machine on the library path. `run --check` checks that
# every binary and component finds every library it needs. `run --cuda` prints where
# each CUDA library the binaries need was found (system paths first, then the Python
# wheels' nvidia/*/lib folders) and its version, or "not found".
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# The folders that may hold a CUDA library: LD_LIBRARY_PATH as given, the loader's cache and the usual CUDA places,
# then the nvidia/*/lib folders of every Python installation we can see (PyTorch's wheels).
cuda_search_dirs() {
    local d py
    tr ':' '\n' <<<"${LD_LIBRARY_PATH:-}"
    if command -v ldconfig >/dev/null 2>&1; then
        ldconfig -p 2>/dev/null | awk '/=>/ {print $NF}' | xargs -r -n1 dirname | awk '!seen[$0]++'
    fi
    for d in ${CUDA_HOME:+"$CUDA_HOME/lib64" "$CUDA_HOME/lib"} /usr/local/cuda/lib64 /usr/local/cuda/lib \
             /usr/local/cuda/targets/x86_64-linux/lib /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib64 \
             /usr/lib/x86_64-linux-gnu /usr/local/lib; do
        echo "$d"
    done
    for py in ${VIRTUAL_ENV:+"$VIRTUAL_ENV/bin/python3"} $(command -v -a python3 2>/dev/null || true); do
        env -u LD_LIBRARY_PATH "$py" -c 'import nvidia; print(*nvidia.__path__, sep="\n")' 2>/dev/null || true
    done | while read -r d; do ls -d "$d"/*/lib 2>/dev/null || true; done
    local sp
    for sp in ${VIRTUAL_ENV:+"$VIRTUAL_ENV"/lib/python3*/site-packages} /usr/local/lib/python3*/{site,dist}-packages \
              /usr/lib/python3*/{site,dist}-packages "$HOME"/.local/lib/python3*/site-packages \
              /opt/*/lib/python3*/site-packages /opt/*/{.venv,venv}/lib/python3*/site-packages \
              /root/*/lib/python3*/site-packages /workspace/*/lib/python3*/site-packages; do
        ls -d "$sp"/nvidia/*/lib 2>/dev/null || true
    done
}

# One line per CUDA library: "soname dir", the first search folder holding it, or "soname -"
# where none does. First the sonames the bundle needs (root/cuda-needed.txt), then the
# driver and the libraries cuDNN and cuBLAS may load at run time, which are optional.
find_cuda() {
    local dirs soname d found major
    mapfile -t dirs < <(cuda_search_dirs | awk 'NF && !seen[$0]++')
    major=$(sed -n 's/^libcublas\.so\.//p' "$ROOT/cuda-needed.txt")
    { cat "$ROOT/cuda-needed.txt"; echo libcuda.so.1; [ -n "$major" ] && echo "libnvrtc.so.$major libnvJitLink.so.$major"; } |
        tr ' ' '\n' | while read -r soname; do
        found=-
        for d in "${dirs[@]}"; do
            if [ -e "$d/$soname" ]; then found=$d; break; fi
        done
        echo "$soname $found"
    done
}

# The version of the CUDA library at path: asked of the library itself (Python's ctypes:
# cublasGetProperty, cudnnGetVersion, ncclGetVersion), else the real file's name.
lib_version() {
    local path=$1 v=
    if command -v python3 >/dev/null 2>&1; then
        v=$(env -u LD_LIBRARY_PATH python3 - "$path" 2>/dev/null <<'PY' || true
import ctypes, glob, os, sys
path = sys.argv[1]
name = os.path.basename(path)
if name.startswith("libcublas"):  # libcublas needs libcublasLt, beside it or in another folder
    lt = [p for d in os.environ.get("PP_CUDA_DIRS", "").split(":") for p in glob.glob(d + "/libcublasLt.so.*")]
    for p in lt[:1]:
        ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL)
lib = ctypes.CDLL(path)
if name.startswith("libcudnn"):
    v = lib.cudnnGetVersion()
    print(f"{v // 10000}.{v // 100 % 100}.{v % 100}")
elif name.startswith("libnccl"):
    v = ctypes.c_int()
    lib.ncclGetVersion(ctypes.byref(v))
    v = v.value
    print(f"{v // 10000}.{v // 100 % 100}.{v % 100}")
elif name.startswith("libcublasLt"):
    v = ctypes.c_size_t(lib.cublasLtGetVersion()).value
    print(f"{v // 10000}.{v // 100 % 100}.{v % 100}")
elif name.startswith("libcublas"):
    part = ctypes.c_int()
    print(".".join(str((lib.cublasGetProperty(k, ctypes.byref(part)), part.value)[1]) for k in range(3)))
PY
)
    fi
    echo "${v:-$(basename "$(readlink -f "$path")")}"
}

mapfile -t CUDA_FOUND < <(find_cuda)
cuda_path=
for line in "${CUDA_FOUND[@]}"; do
    dir=${line#* }
    [ "$dir" = - ] && continue
    case ":$cuda_path:" in *":$dir:"*) ;; *) cuda_path=${cuda_path:+$cuda_path:}$dir ;; esac
done

if [ "${1:-}" = --cuda ]; then
    export PP_CUDA_DIRS=$cuda_path
    for line in "${CUDA_FOUND[@]}"; do
        soname=${line%% *} dir=${line#* }
        if [ "$dir" = - ] && ! grep -qxF "$soname" "$ROOT/cuda-needed.txt"; then echo "$soname: not found (optional)"
        elif [ "$dir" = - ]; then echo "$soname: not found"
        elif [ "$soname" = libcuda.so.1 ]; then echo "$soname: $dir (driver)"; else echo "$soname: $dir ($(lib_version "$dir/$soname"))"; fi
    done
    exit 0
fi

# Open MPI and PMIx were configured for /usr; these variables move every folder they read
# (components, help texts, parameter files) into the bundle.
export LD_LIBRARY_PATH=$ROOT/lib${cuda_path:+:$cuda_path}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$ROOT/bin:${PATH:-/usr/local/bin:/usr/bin:/bin}
export OPAL_PREFIX=$ROOT OPAL_EXEC_PREFIX=$ROOT OPAL_BINDIR=$ROOT/bin OPAL_LIBDIR=$ROOT/lib
export OPAL_PKGLIBDIR=$ROOT/lib/openmpi OPAL_DATAROOTDIR=$ROOT/share OPAL_DATADIR=$ROOT/share
export OPAL_PKGDATADIR=$ROOT/share/openmpi OPAL_SYSCONFDIR=$ROOT/etc
export PMIX_PREFIX=$ROOT PMIX_EXEC_PREFIX=$ROOT PMIX_BINDIR=$ROOT/bin PMIX_LIBDIR=$ROOT/lib
export PMIX_PKGLIBDIR=$ROOT/lib/pmix PMIX_DATAROOTDIR=$ROOT/share PMIX_DATADIR=$ROOT/share
export PMIX_PKGDATADIR=$ROOT/share/pmix PMIX_SYSCONFDIR=$ROOT/etc
export PMIX_MCA_mca_base_component_path=$ROOT/lib/pmix
export HWLOC_PLUGINS_PATH=$ROOT/lib/hwloc

# `run --check`: every file of MANIFEST is there, and every ELF file of the bundle resolves every library it needs from the
# bundle, the CUDA folders found above, or the system's C/C++ runtime (system-libs.txt)
if [ "${1:-}" = --check ]; then
    system=$(cat "$ROOT/system-libs.txt")
    declare -A cuda_dir
    for line in "${CUDA_FOUND[@]}"; do cuda_dir[${line%% *}]=${line#* }; done
    bad=0 n=0
    while read -r f; do [ -e "$ROOT/$f" ] || { echo "$ROOT/${f#./}: missing (it is in MANIFEST)"; bad=1; }; done <"$ROOT/MANIFEST"
    for f in "$ROOT"/bin/* "$ROOT"/lib/*.so* "$ROOT"/lib/openmpi/*.so "$ROOT"/lib/pmix/*.so; do
        [ "$(head -c4 "$f" | tr -d '\0')" = $'\x7fELF' ] || continue
        n=$((n + 1))
        while read -r soname _ path _; do
            if [ "$path" = not ]; then echo "$f: $soname not found"; bad=1; continue; fi
            [[ $path == "$ROOT"/lib/* || $soname =~ $system ]] && continue
            [ "${cuda_dir[$soname]:-}" = "$(dirname "$path")" ] && continue
            echo "$f: $soname from $path (neither the bundle, CUDA nor the C/C++ runtime)"; bad=1
        done < <(ldd "$f" | grep '=>')
    done
    echo "$n ELF files: $([ $bad = 0 ] && echo "every library from the bundle, CUDA ($cuda_path) or the C/C++ runtime" || echo "some libraries from elsewhere (above)")"
    exit $bad
fi
exec "$@"
