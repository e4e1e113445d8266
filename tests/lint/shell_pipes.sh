#!/usr/bin/env bash
# No shell script of the tree pipes into `grep -q`. grep -q exits at its first match; the
# command writing into the pipe then dies of SIGPIPE if it writes more, and under `set -o
# pipefail` (which the test scripts use) the check fails although the line was there: a flake
# that shows only when the writer is slow (it_ch_distributed failed so in CI). Write
# `| grep PATTERN >/dev/null` instead: grep reads its input whole.
#   shell_pipes.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: shell_pipes.sh SOURCE_DIR}
bad=0 n=0
while IFS= read -r -d '' f; do
    [[ $f == *.sh ]] && n=$((n + 1))
    # `| grep -q`, `| grep -Eq`, `| grep -qx` ...: a pipe into grep with q among its flags
    if hits=$(grep -nE '\|[[:space:]]*grep[[:space:]]+-[A-Za-z]*q' "$f" | grep -vE '^[0-9]+:[[:space:]]*#'); then
        while IFS= read -r h; do
            echo "${f#"$src"/}:$h" >&2
        done <<<"$hits"
        bad=1
    fi
done < <(find "$src" \( -name node_modules -o -name '.git' -o -name 'build*' \) -prune -o \
    -type f \( -name '*.sh' -o -path '*/.ci/run' \) -print0)
[ "$n" -gt 20 ] || { echo "FAIL: only $n shell scripts found under $src" >&2; exit 1; }
[ "$bad" = 0 ] || { echo "FAIL: pipes into grep -q (see above); use: | grep PATTERN >/dev/null" >&2; exit 1; }
echo "PASS: $n shell scripts, no pipe into grep -q"
