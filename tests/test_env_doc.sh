#!/usr/bin/env bash
# The README's "Environment variables" table names exactly the variables of core/env.c's
# table, every pp_env_* call in the library and the command names one of them, and no file
# of theirs but core/env.c calls getenv. Prints the names it compared.
set -euo pipefail
: "${SRC_DIR:?}"
python3 - "$SRC_DIR" <<'PYEOF'
import os, re, sys
src = sys.argv[1]
table = re.findall(r'^\s*\{"([A-Z][A-Za-z0-9_]*)",', open(os.path.join(src, "core/env.c")).read(), re.M)

readme = open(os.path.join(src, "README.md")).read()
m = re.search(r"^## Environment variables\n(.*?)^## ", readme, re.M | re.S)
if not m:
    sys.exit("FAIL: README.md has no '## Environment variables' section")
documented = []
for row in re.findall(r"^\| (.*?) \|", m.group(1), re.M):
    if row.strip("-") and row != "variable":
        documented += re.findall(r"`([A-Z][A-Za-z0-9_]*)`", row)

fail = 0
print(f"core/env.c: {len(table)} variables: {' '.join(table)}")
print(f"README:     {len(documented)} variables: {' '.join(documented)}")
for name in sorted(set(table) - set(documented)):
    print(f"FAIL: {name} is in core/env.c's table but not in the README's table"); fail = 1
for name in sorted(set(documented) - set(table)):
    print(f"FAIL: {name} is in the README's table but not in core/env.c's"); fail = 1
for name in sorted({n for n in table if table.count(n) > 1} | {n for n in documented if documented.count(n) > 1}):
    print(f"FAIL: {name} is listed twice"); fail = 1

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
echo "ok: the README lists exactly core/env.c's variables; only core/env.c calls getenv"
