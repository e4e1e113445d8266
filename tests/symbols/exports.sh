#!/usr/bin/env bash
# exports.sh LIST: each line of LIST is a static library (libpfr_*.a). Fails when a library
# exports a name that is not pfr_-prefixed, or when two libraries export the same name, and
# prints every offending name. Prints the count of exported names per library either way.
#
# Allowed besides pfr_*: in libpfr_proto, protobuf-c's generated names for profile.proto
# (package perftools.profiles: perftools__profiles__*).
set -euo pipefail

list=${1:?usage: exports.sh LIBRARIES.txt}
command -v nm >/dev/null || { echo "exports: nm not found" >&2; exit 1; }
[[ -s $list ]] || { echo "exports: $list is empty or missing" >&2; exit 1; }

fail=0
all=$(mktemp)
trap 'rm -f "$all"' EXIT
while IFS= read -r lib; do
    [[ -n $lib ]] || continue
    if [[ ! -f $lib ]]; then
        echo "FAIL $lib: not built (build every target before running this test)"
        fail=1
        continue
    fi
    name=$(basename "$lib")
    # Defined global names: any upper-case type but U (undefined).
    names=$(nm -g --defined-only "$lib" | awk 'NF == 3 && $2 ~ /^[A-TV-Z]$/ {print $3}' | sort -u)
    allowed='^pfr_'
    [[ $name == libpfr_proto.a ]] && allowed='^(pfr_|perftools__profiles__)'
    bad=$(grep -Ev "$allowed" <<<"$names" | grep -v '^$' || true)
    printf '%-34s %4d exported' "$name" "$(grep -c . <<<"$names" || true)"
    if [[ -n $bad ]]; then
        printf ', %d unprefixed: FAIL\n' "$(wc -l <<<"$bad")"
        sed 's/^/    /' <<<"$bad"
        fail=1
    else
        printf '\n'
    fi
    [[ -n $names ]] && sed "s|\$| $name|" <<<"$names" >>"$all"
done <"$list"

dups=$(awk '{n[$1]++; l[$1] = l[$1] " " $2} END {for (s in n) if (n[s] > 1) print s ":" l[s]}' "$all" |
    sort)
if [[ -n $dups ]]; then
    echo "FAIL names exported by more than one library:"
    sed 's/^/    /' <<<"$dups"
    fail=1
fi
exit $fail
