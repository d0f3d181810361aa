# Sourced by the tests of generated docs (test_api_docs, test_cli_doc, test_env_doc,
# test_ops_doc): each regenerates its doc into test-out and calls
#   same_as_committed TEST DOC FRESH WHY REGENERATE
# which passes when the committed DOC equals FRESH and otherwise prints the diff, why the doc
# goes stale (WHY) and the command that makes it again (REGENERATE), and exits 1.
same_as_committed() {
    local test=$1 doc=$2 fresh=$3 why=$4 regen=$5
    diff -u "$doc" "$fresh" && return 0
    echo "$test: ${doc#"$SRC_DIR"/} is stale ($why); regenerate it with:" >&2
    echo "  $regen" >&2
    exit 1
}
