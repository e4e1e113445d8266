#!/usr/bin/env bash
# release_bound.sh CTEST TREE NAME: test NAME of the release tree TREE, as a test of this tree
# (release_NAME, tests/CMakeLists.txt), its output in this test's (ctest -V: check_skips.py reads
# it). Fails where the inner ctest alone would pass: NAME not in TREE, or skipped.
set -uo pipefail
[ $# = 3 ] || {
    echo "usage: release_bound.sh CTEST TREE NAME" >&2
    exit 2
}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$1" --test-dir "$2" -R "^$3\$" --no-tests=error -V 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
if grep -q '\*\*\*Skipped' "$out"; then
    echo "FAIL: $3 was skipped in $2"
    exit 1
fi
exit "$rc"
