#!/usr/bin/env bash
# Every public function says whether it is local to the rank or collective (and over which
# communicator), in the comment above it (shared by the declarations right below it) or
# beside it: the rule core.h states for the whole API. And docs/api.md, the headers' index,
# is what scripts/gen-api-doc.py makes of them. Prints what it counted.
set -euo pipefail
. "$(dirname "$0")/lib/generated_doc.sh"
: "${SRC_DIR:?}" "${BUILD_DIR:?}"
OUT=$BUILD_DIR/test-out/api_docs
mkdir -p "$OUT"
python3 "$SRC_DIR/scripts/gen-api-doc.py" --src "$SRC_DIR" -o "$OUT/api.md"
same_as_committed test_api_docs "$SRC_DIR/docs/api.md" "$OUT/api.md" "a header or its functions changed" \
    "python3 $SRC_DIR/scripts/gen-api-doc.py"
echo "docs/api.md matches the headers: $(sed -n 's/^\([0-9]* installed headers declare [0-9]* functions\).*/\1/p' "$OUT/api.md")"
python3 - "$SRC_DIR/include/onnxpipe" <<'PYEOF'
import os, re, sys
root = sys.argv[1]
missing, total = [], 0
for name in sorted(os.listdir(root)):
    if not name.endswith(".h"):
        continue
    lines = open(os.path.join(root, name)).read().split("\n")
    block, in_comment, comment = "", False, ""   # the comment that covers the next declarations
    i = 0
    while i < len(lines):
        line = lines[i]
        s = line.strip()
        if in_comment:
            comment += " " + s
            if "*/" in s:
                in_comment = False
                block = comment
            i += 1
            continue
        if s.startswith("/*"):
            comment = s
            if "*/" not in s:
                in_comment = True
            else:
                block = comment
            i += 1
            continue
        if s.startswith("PP_API") and "(" in s and not s.startswith("#"):
            decl = s
            while ";" not in decl and i + 1 < len(lines):
                i += 1
                decl += " " + lines[i].strip()
            total += 1
            text = block + " " + decl
            if not re.search(r"\b(Local|Collective)\b", text):
                fn = re.search(r"(pp_\w+)\s*\(", decl)
                missing.append(f"{name}: {fn.group(1) if fn else decl[:60]}")
            i += 1
            continue
        if s == "" or s.startswith("#") or s.startswith("typedef") or s.startswith("}") or s.startswith("struct"):
            block = ""                                  # a blank line or a type ends the comment's reach
        i += 1
print(f"{total} public functions; {total - len(missing)} say Local or Collective")
for m in missing:
    print("  no Local/Collective:", m)
sys.exit(1 if missing else 0)
PYEOF
