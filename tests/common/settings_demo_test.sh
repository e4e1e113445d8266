#!/bin/sh
# settings_demo run as a user would: default < file < environment < flag, aliases, lists,
# [sink NAME] sections, the refusals with their file and line, --help, and
# scripts/gen-config-docs.sh over the committed demo sample and reference.
# Usage: settings_demo_test.sh SETTINGS_DEMO SOURCE_DIR
set -eu
demo=$1
src=$2
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
unset PFR_DEMO_CONFIG PFR_DEMO_CPU_HZ PFR_DEMO_STORE PFR_DEMO_INTERVAL DEMO_TOKEN PFR_DEMO_TOKEN \
  DEMO_URL 2>/dev/null || true
fails=0

fail() {
  echo "FAIL: $*" >&2
  fails=$((fails + 1))
}

# expect_line OUTPUT_FILE LINE: the file holds LINE exactly.
expect_line() {
  grep -qxF -- "$2" "$1" || fail "no line '$2' in: $(cat "$1")"
}

# expect_error WANT_TEXT ARGS...: exit status 2 and WANT_TEXT in the message.
expect_error() {
  want=$1
  shift
  if "$@" >"$t/out" 2>"$t/err"; then
    fail "'$*' succeeded"
    return
  fi
  grep -qF -- "$want" "$t/err" || fail "'$*': no '$want' in: $(cat "$t/err")"
}

# defaults
"$demo" >"$t/out"
expect_line "$t/out" "store=/var/lib/demo/ring.db"
expect_line "$t/out" "interval=10s"
expect_line "$t/out" "max_store_bytes=512M"
expect_line "$t/out" "dwarf=true"

# every layer, each winning over the one before
cat >"$t/demo.ini" <<'EOF'
# a comment
[demo]
interval = 1m30s
cpu_hz = 200
store = /from/file
max_store_bytes = 1G
unwind = fp

[service]
rule = comm a A
rule = comm b B

[sink one]
url = http://one
password_file = /k

[other]
ignored = no, refused
EOF
expect_error "demo.ini:18: unknown section [other]" "$demo" --config "$t/demo.ini"
sed -i '/^\[other\]/,$d' "$t/demo.ini"
PFR_DEMO_CONFIG="$t/demo.ini" PFR_DEMO_CPU_HZ=300 PFR_DEMO_STORE=/from/env DEMO_URL=http://env \
  "$demo" --cpu-hz 400 --service-rule 'exe c C' --no-dwarf -n node1 --budget 250ms \
  >"$t/out"
expect_line "$t/out" "interval=1m30s"
expect_line "$t/out" "store=/from/env"
expect_line "$t/out" "cpu_hz=400"
expect_line "$t/out" "max_store_bytes=1G"
expect_line "$t/out" "unwind=fp"
expect_line "$t/out" "dwarf=false"
expect_line "$t/out" "name=node1"
expect_line "$t/out" "budget_ms=250"
expect_line "$t/out" "sink one url=http://one (file)"
expect_line "$t/out" "sink one api_key_file=/k (file)"
expect_line "$t/out" "sink * url=http://env (env)"
[ "$(grep '^rule=' "$t/out" | tr '\n' '|')" = "rule=exe c C|rule=comm a A|rule=comm b B|" ] ||
  fail "rules out of order: $(grep '^rule=' "$t/out")"
# a secret from the environment, never echoed
DEMO_TOKEN="s3cret" "$demo" >"$t/out"
expect_line "$t/out" "token=(set)"
DEMO_TOKEN="s3 cret" "$demo" >"$t/out" 2>"$t/err" && fail "a bad secret was taken"
grep -q s3 "$t/err" && fail "the secret is in the message: $(cat "$t/err")"
grep -qF "DEMO_TOKEN: not a valid string" "$t/err" || fail "secret: $(cat "$t/err")"

# refusals, each naming where
printf '[demo]\ncpu_hz = 1\ncpu_hz = 2\n' >"$t/dup.ini"
expect_error "dup.ini:3: key 'cpu_hz' in [demo] given again (first at line 2)" \
  "$demo" --config "$t/dup.ini"
printf '[demo]\nbogus = 1\n' >"$t/unknown.ini"
expect_error "unknown.ini:2: unknown key 'bogus' in [demo]" "$demo" --config "$t/unknown.ini"
printf '[demo]\ninterval = 0.1\n' >"$t/bound.ini"
expect_error "bound.ini:2: interval: '0.1' is below 200ms" "$demo" --config "$t/bound.ini"
printf '[demo]\n# %0300d interval = 7\ninterval = 20s\n' 0 >"$t/long.ini"
"$demo" --config "$t/long.ini" >"$t/out"
expect_line "$t/out" "interval=20s"
expect_error "PFR_DEMO_INTERVAL: '10x' is not a duration" env PFR_DEMO_INTERVAL=10x "$demo"
expect_error "--unwind: 'sideways' is not one of auto, fp, dwarf" "$demo" --unwind sideways
expect_error "--cpu-hz: '20000' is above 10000" "$demo" --cpu-hz 20000
expect_error "unknown option '--bogus'" "$demo" --bogus
expect_error "unexpected argument 'extra'" "$demo" extra
expect_error "cannot open config file /nonexistent.ini" "$demo" --config /nonexistent.ini

# --help and --print-settings=help print the same
"$demo" --help >"$t/help1"
"$demo" --print-settings=help >"$t/help2"
cmp -s "$t/help1" "$t/help2" || fail "--help and --print-settings=help differ"
grep -qF -- "--interval DURATION" "$t/help1" || fail "--help: $(cat "$t/help1")"
grep -qF -- "--config FILE" "$t/help1" || fail "--help lacks --config"
# the sample file is a valid config file for its program
"$demo" --print-settings=sample >"$t/sample.ini"
"$demo" --config "$t/sample.ini" >"$t/out" || fail "the sample is refused: $(cat "$t/sample.ini")"

# the generator: committed demo files match; a stale one fails with a diff; a write fixes it
gen="$src/scripts/gen-config-docs.sh"
fx="$src/tests/common/settings_demo"
bash "$gen" --check --program "$demo" "$fx/demo.ini" "$fx/demo.md" >"$t/gen" 2>&1 ||
  fail "committed demo files differ: $(cat "$t/gen")"
cp "$fx/demo.ini" "$fx/demo.md" "$t/"
sed -i 's/^#interval = 10s$/#interval = 5s/' "$t/demo.ini"
sed -i 's/| length of one profile/| length of 1 profile/' "$t/demo.md"
if bash "$gen" --check --program "$demo" "$t/demo.ini" "$t/demo.md" >"$t/gen" 2>&1; then
  fail "--check passed stale files"
fi
grep -qF -- "-#interval = 5s" "$t/gen" || fail "no diff of the sample: $(cat "$t/gen")"
grep -qF -- "-| \`--interval DURATION\` | \`interval\` | \`PFR_DEMO_INTERVAL\` | \`10s\` | length of 1 profile" \
  "$t/gen" || fail "no diff of the reference: $(cat "$t/gen")"
bash "$gen" --program "$demo" "$t/demo.ini" "$t/demo.md" || fail "the generator failed"
cmp -s "$t/demo.ini" "$fx/demo.ini" || fail "the sample was not regenerated"
cmp -s "$t/demo.md" "$fx/demo.md" || fail "the reference was not regenerated"
grep -q "hand-written" "$t/demo.md" || fail "the prose around the blocks was lost"
# a block without markers in the doc is an error, not silently dropped
grep -v 'settings:demo:service-rules' "$fx/demo.md" >"$t/nomark.md"
if bash "$gen" --program "$demo" - "$t/nomark.md" >"$t/gen" 2>&1; then
  fail "a block without markers passed"
fi
grep -qF "no markers for service-rules" "$t/gen" || fail "markers: $(cat "$t/gen")"
# a program without --print-settings is left alone, with a note
printf '#!/bin/sh\necho "unknown option" >&2; exit 2\n' >"$t/old"
chmod +x "$t/old"
cp "$fx/demo.md" "$t/old.md"
bash "$gen" --program "$t/old" - "$t/old.md" 2>"$t/gen" || fail "an old program failed the run"
grep -qF "no --print-settings" "$t/gen" || fail "no note: $(cat "$t/gen")"
cmp -s "$t/old.md" "$fx/demo.md" || fail "an old program's doc was touched"

[ "$fails" -eq 0 ] || exit 1
echo "settings_demo: all checks passed"
