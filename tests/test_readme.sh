#!/usr/bin/env bash
# The README stays a front page: at most 500 lines (the rest lives in docs/), its test
# command is the one CI runs (.ci/run), and every relative link of the README and docs/*.md
# names a file of the tree. Prints the count and what it checked.
set -euo pipefail
: "${SRC_DIR:?}"
python3 - "$SRC_DIR" <<'PYEOF'
import os, re, sys
src = sys.argv[1]
MAX = 500
fail = 0
readme = open(os.path.join(src, "README.md")).read()
n = len(readme.splitlines())
print(f"README.md: {n} lines (at most {MAX})")
if n > MAX:
    print(f"FAIL: README.md has {n} lines; move the detail into docs/ and link it"); fail = 1

# the README's test command: the first command of the sh block under "## Tests"
m = re.search(r"^## Tests\n.*?```sh\n([^\n#]*?)\s*(#[^\n]*)?\n", readme, re.M | re.S)
ci = [l.strip() for l in open(os.path.join(src, ".ci/run")) if l.strip() and not l.startswith("#")
      and not l.startswith(("set ", "cd "))]
if not m:
    print("FAIL: README.md has no sh block under '## Tests'"); fail = 1
else:
    print(f"README's test command: '{m.group(1)}'; .ci/run runs: {ci}")
    if ci != [m.group(1)]:
        print("FAIL: .ci/run does not run the README's test command, and only it"); fail = 1

# relative links: [text](path) or [text](path#anchor), resolved from the page's folder
pages = ["README.md"] + sorted(os.path.join("docs", p) for p in os.listdir(os.path.join(src, "docs")) if p.endswith(".md"))
links = 0
for page in pages:
    text = re.sub(r"```.*?```", "", open(os.path.join(src, page)).read(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        links += 1
        path = os.path.normpath(os.path.join(src, os.path.dirname(page), target.split("#")[0]))
        if not os.path.exists(path):
            print(f"FAIL: {page} links to {target}, which is not in the tree"); fail = 1
print(f"{links} relative links in {len(pages)} pages checked")
sys.exit(fail)
PYEOF
echo "ok: README.md is a front page of at most 500 lines; its links and test command hold"
