# Helpers of the query tool's integration tests (sourced by cli_test.sh and
# export_force_test.sh after they set W, the work folder): a fresh $W, and the counts of checks
# passed and failed.
rm -rf "$W"
mkdir -p "$W"
export HOME=$W TZ=UTC
passes=0
fails=0
ok() { echo "ok   $*"; passes=$((passes + 1)); }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
check() { # check DESCRIPTION COMMAND...
    local what=$1
    shift
    if "$@"; then ok "$what"; else bad "$what"; fi
}
