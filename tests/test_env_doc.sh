#!/usr/bin/env bash
# docs/environment.md is what scripts/gen-env-doc.py makes from core/env.c's table (regenerated
# into a temp file, it must equal the committed one), every pp_env_* call in the library and
# the command names a variable of that table, and no file of theirs but core/env.c calls
# getenv. Prints the names it compared.
set -euo pipefail
. "$(dirname "$0")/lib/generated_doc.sh"
: "${SRC_DIR:?}" "${BUILD_DIR:?}"
OUT=$BUILD_DIR/test-out/env_doc
mkdir -p "$OUT"
python3 "$SRC_DIR/scripts/gen-env-doc.py" --src "$SRC_DIR" -o "$OUT/environment.md"
same_as_committed test_env_doc "$SRC_DIR/docs/environment.md" "$OUT/environment.md" "core/env.c's table changed" \
    "python3 $SRC_DIR/scripts/gen-env-doc.py"
echo "ok: docs/environment.md is core/env.c's table ($(grep -c '^| `' "$OUT/environment.md") variables)"
python3 "$SRC_DIR/scripts/gen-env-doc.py" --src "$SRC_DIR" --names >"$OUT/names"
python3 - "$SRC_DIR" "$OUT/names" <<'PYEOF'
import os, re, sys
src = sys.argv[1]
table = open(sys.argv[2]).read().split()

fail = 0
print(f"core/env.c: {len(table)} variables: {' '.join(table)}")
for name in sorted({n for n in table if table.count(n) > 1}):
    print(f"FAIL: {name} is listed twice in core/env.c's table"); fail = 1

modules = ["core", "graph", "partitioner", "scheduler", "driver", "stage", "comm", "kernels", "ckpt", "planner", "train", "cli"]
files = 0
for mod in modules:
    for root, _, names in os.walk(os.path.join(src, mod)):
        for n in names:
            if not n.endswith((".c", ".h", ".cu", ".cuh")):
                continue
            path = os.path.join(root, n)
            rel = os.path.relpath(path, src)
            text = open(path, errors="replace").read()
            files += 1
            code = re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)   # comments may name getenv
            if rel != "core/env.c" and re.search(r"\b(secure_)?getenv\s*\(", code):
                print(f"FAIL: {rel} calls getenv; read the variable through core/env.h (pp_env_get)"); fail = 1
            for name in re.findall(r'\bpp_env_\w+\s*\(\s*"([^"]+)"', code):
                if name not in table:
                    print(f"FAIL: {rel} reads {name}, which core/env.c's table lacks"); fail = 1
print(f"{files} files of the library and the command searched for getenv and pp_env_* calls")
sys.exit(fail)
PYEOF
echo "ok: docs/environment.md lists exactly core/env.c's variables; only core/env.c calls getenv"
