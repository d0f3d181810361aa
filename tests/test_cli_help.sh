#!/usr/bin/env bash
# Every command's --help against its parser (both come from the command's option table,
# cli/options.c): --help exits 0 with a usage line, no line past column 100, no option
# left under "other options" (a heading its command does not list), and every option it
# names is one the parser takes (given without its value it is "needs a value", never
# "unknown option"); one spelling per meaning (-o/--out, never --output) in every command.
set -euo pipefail
: "${ONNXPIPE:?}" "${BUILD_DIR:?}" "${SRC_DIR:?}"
OUT=$BUILD_DIR/test-out/cli_help
rm -rf "$OUT"
mkdir -p "$OUT"
cd "$OUT"

# the commands docs/cli.md documents
mapfile -t commands < <(bash "$SRC_DIR/scripts/gen-cli-doc.sh" --commands)
total=0
seen=""
for cmd in "${commands[@]}"; do
    read -ra words <<<"$cmd"
    "$ONNXPIPE" "${words[@]}" --help >help.txt
    grep -q "^usage: onnxpipe ${words[0]}" help.txt || { echo "$cmd --help: no usage line" >&2; exit 1; }
    if awk 'length > 100 { bad = 1 } END { exit !bad }' help.txt; then
        echo "$cmd --help: a line past column 100" >&2
        exit 1
    fi
    if grep -q "^other options:" help.txt; then
        echo "$cmd --help: options under no heading of the command" >&2
        exit 1
    fi
    if grep -q -- "--output\b" help.txt; then
        echo "$cmd --help: --output (the spelling is -o/--out)" >&2
        exit 1
    fi
    mapfile -t opts < <(grep -oE '^  (-[a-z], )?--[a-z0-9-]+' help.txt | sed -E 's/^  (-[a-z], )?//')
    [ "${#opts[@]}" -gt 0 ] || [ "$cmd" = "ckpt verify" ] || { echo "$cmd --help lists no option" >&2; exit 1; }
    for o in "${opts[@]+"${opts[@]}"}"; do
        # a flag runs the command (and fails on what is missing); a value-taking option,
        # given last, needs its value: neither is an unknown option. A row several
        # commands share (the training options' tables) is run once.
        [[ " $seen " == *" $o "* ]] && continue
        seen+=" $o"
        "$ONNXPIPE" "${words[@]}" "$o" >/dev/null 2>err.txt || true
        if grep -q "unknown option" err.txt; then
            echo "$cmd: --help lists $o, the parser does not take it: $(cat err.txt)" >&2
            exit 1
        fi
    done
    total=$((total + ${#opts[@]}))
    echo "ok: $cmd --help: ${#opts[@]} options, each taken by the parser"
done
# the options that split a model and shape a stage are train's in every preview
for o in --balance --cut --recompute --precision --frozen; do
    for cmd in train partition; do
        "$ONNXPIPE" "$cmd" --help >help.txt
        grep -q -- "^  $o " help.txt || { echo "$cmd --help lacks $o" >&2; exit 1; }
    done
done
echo "cli help: ${#commands[@]} commands, $total options listed, $(wc -w <<<"$seen") distinct ones parsed"
