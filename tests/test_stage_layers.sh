#!/usr/bin/env bash
# stage/'s files depend in one direction (stage/stage_types.h says the layers;
# docs/architecture.md, "stage/'s layers"). A file's layer is the one layer header it includes:
#   build  (stage_build.h)  may call places, fuse, run
#   places (stage_places.h) may call fuse, run
#   fuse   (stage_fuse.h)   its own files only
#   run    (stage_run.h)    its own files only
# Checked: every stage/*.c includes exactly one layer header; a layer header includes only
# stage_types.h and the headers of layers it may call; in the built objects (nm: what each
# object leaves undefined, where stage/ defines it) no file calls a file of a layer it may
# not call, and the calls between files have no circle (tsort). A failure names the file,
# the function and both layers.
set -euo pipefail
: "${SRC_DIR:?}" "${BUILD_DIR:?}"
STAGE="$SRC_DIR/stage"
OBJ="${STAGE_OBJ_DIR:-$BUILD_DIR/CMakeFiles/onnxpipe_internal.dir/stage}"
declare -A may=([build]="build places fuse run" [places]="places fuse run" [fuse]="fuse" [run]="run")
declare -A layer_of
bad=0
fail() { echo "FAIL: $*"; bad=1; }
allowed() { [[ " ${may[$1]} " == *" $2 "* ]]; }

echo "== headers: a layer's header includes only stage_types.h and the headers of layers it may call"
for l in "${!may[@]}"; do
    h="$STAGE/stage_$l.h"
    [ -f "$h" ] || { fail "stage/stage_$l.h is missing"; continue; }
    while IFS=: read -r line inc; do
        [[ "$inc" == stage_types.h ]] && continue
        to="${inc#stage_}"; to="${to%.h}"
        if [ -z "${may[$to]+x}" ]; then fail "stage/stage_$l.h:$line includes \"$inc\", no layer header"
        elif [ "$to" = "$l" ] || ! allowed "$l" "$to"; then fail "stage/stage_$l.h:$line includes \"$inc\": layer $l may not call layer $to"
        fi
    done < <(grep -n '^#include "' "$h" | sed 's/^\([0-9]*\):#include "\([^"]*\)".*/\1:\2/')
done

echo "== sources: each includes exactly one layer header, its layer"
for f in "$STAGE"/*.c; do
    b=$(basename "$f" .c)
    incs=$( (grep -o '^#include "stage_[a-z]*\.h"' "$f" || true) | sed 's/.*"stage_\([a-z]*\)\.h"/\1/' | tr '\n' ' ')
    n=$(echo $incs | wc -w)
    if [ "$n" != 1 ] || [ -z "${may[${incs% }]+x}" ]; then
        fail "stage/$b.c includes ${incs:-no layer header}: it must include exactly one of stage_{build,places,fuse,run}.h"
        continue
    fi
    layer_of[$b]=${incs% }
done

echo "== calls between files, from the objects (nm)"
defs=$(mktemp) edges=$(mktemp)
trap 'rm -f "$defs" "$edges"' EXIT
for f in "$STAGE"/*.c; do
    b=$(basename "$f" .c) o="$OBJ/$(basename "$f").o"
    [ -f "$o" ] || { fail "stage/$b.c has no object $o: build first"; continue; }
    nm --defined-only -g "$o" | awk -v f="$b" '$2 == "T" {print $3, f}'
done | sort > "$defs"
ncalls=0
for f in "$STAGE"/*.c; do
    b=$(basename "$f" .c) o="$OBJ/$(basename "$f").o"
    [ -f "$o" ] && [ -n "${layer_of[$b]:-}" ] || continue
    while read -r sym to; do
        [ "$to" = "$b" ] && continue
        [ -n "${layer_of[$to]:-}" ] || continue
        ncalls=$((ncalls + 1))
        echo "$b $to" >> "$edges"
        allowed "${layer_of[$b]}" "${layer_of[$to]}" ||
            fail "stage/$b.c (layer ${layer_of[$b]}) calls $sym of stage/$to.c (layer ${layer_of[$to]}): layer ${layer_of[$b]} may call only ${may[${layer_of[$b]}]}"
    done < <(nm -u "$o" | awk '{print $2}' | sort | join - "$defs")
done
if ! sort -u "$edges" | tsort > /dev/null 2> "$defs.loop"; then
    fail "the calls between stage/'s files have a circle: $(grep -v 'input contains a loop' "$defs.loop" | sed 's/^tsort: //' | tr '\n' ' ')"
fi
rm -f "$defs.loop"

for l in build places fuse run; do
    files=$(for b in "${!layer_of[@]}"; do if [ "${layer_of[$b]}" = "$l" ]; then echo "$b.c"; fi; done | sort | tr '\n' ' ')
    echo "  $l: $files"
done
echo "checked ${#layer_of[@]} files, $ncalls calls between them ($(sort -u "$edges" | wc -l) file pairs)"
[ "$bad" = 0 ] && echo "ok: stage/'s files call down their layers only, with no circle"
exit "$bad"
