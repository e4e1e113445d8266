#!/usr/bin/env bash
# The sample config files and the tables of docs/configuration.md, generated from the programs'
# settings tables (common/pfr_settings.h) through their hidden --print-settings flag; and the
# recorder's metric reference in docs/operations.md, from its metric tables
# (recorder/metrics/pfr_metric_rows.h) through the build tool pfr-recorder-metrics.
#
#   scripts/gen-config-docs.sh [--check] BUILD_DIR
#       pfr-recorder -> config/recorder.ini and its blocks in docs/configuration.md,
#       pfr-shipper  -> config/shipper.ini  and its blocks,
#       pfr          -> its blocks,
#       pfr-recorder-metrics -> the block metrics:pfr-recorder:reference in docs/operations.md.
#   scripts/gen-config-docs.sh [--check] --program BIN SAMPLE|- DOC
#       one program: its sample into SAMPLE ("-": none), its blocks into DOC.
#
# A block is the text between "<!-- settings:PROGRAM:GROUP begin -->" and "<!-- settings:
# PROGRAM:GROUP end -->"; the prose around the blocks stays hand-written. Every block a program
# prints must have its markers in DOC already (put them where the table belongs), and DOC may
# hold no block of that program it no longer prints. A program without --print-settings (not
# converted to the settings tables yet) is left alone, with a note.
#
# --check writes nothing: it generates into a temporary copy and fails with a diff where a
# committed file differs (ctest docs_settings_generated).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check=0
if [ "${1:-}" = "--check" ]; then
  check=1
  shift
fi
usage() {
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
[ $# -ge 1 ] || usage

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0

# Replace in doc ($1) the blocks of the reference ($2) of program $3; $4 is the blocks' kind
# (settings, metrics). python3 keeps it exact.
splice() {
  python3 - "$1" "$2" "$3" "${4:-settings}" <<'EOF'
import re, sys
doc_path, ref_path, program, kind = sys.argv[1:5]
doc = open(doc_path, encoding="utf-8").read()
ref = open(ref_path, encoding="utf-8").read()
pat = r"<!-- %s:%s:([^ ]+) begin -->\n.*?<!-- %s:%s:\1 end -->\n" % (
    kind, re.escape(program), kind, re.escape(program))
blocks = {m.group(1): m.group(0) for m in re.finditer(pat, ref, re.S)}
if not blocks:
    sys.exit("%s: its %s reference printed no block" % (program, kind))
found = set()
def put(m):
    name = m.group(1)
    if name not in blocks:
        sys.exit("%s: block %s:%s:%s is no group of %s any more: remove its markers"
                 % (doc_path, kind, program, name, program))
    found.add(name)
    return blocks[name]
out = re.sub(pat, put, doc, flags=re.S)
missing = [n for n in blocks if n not in found]
if missing:
    sys.exit("%s: no markers for %s: add '<!-- %s:%s:%s begin -->' and '... end -->' "
             "where the table belongs" % (doc_path, ", ".join(missing), kind, program, missing[0]))
open(doc_path, "w", encoding="utf-8").write(out)
EOF
}

# One program: bin, sample path (or -), doc path. In check mode the paths are the copies.
generate() {
  local bin=$1 sample=$2 doc=$3 name
  name=$(basename "$bin")
  if ! "$bin" --print-settings=reference >"$tmp/ref.md" 2>"$tmp/err"; then
    echo "note: $name has no --print-settings (not converted to the settings tables yet): left alone" >&2
    return 0
  fi
  local program
  program=$(sed -n 's/^<!-- settings:\([^:]*\):.* begin -->$/\1/p' "$tmp/ref.md" | head -n1)
  if [ -z "$program" ]; then
    echo "$name: --print-settings=reference printed no block" >&2
    return 1
  fi
  if [ "$sample" != "-" ]; then
    "$bin" --print-settings=sample >"$sample.new"
    mv "$sample.new" "$sample"
  fi
  splice "$doc" "$tmp/ref.md" "$program"
}

# The metric reference of the tool ($1) into doc ($2).
generate_metrics() {
  "$1" reference >"$tmp/metrics.md" || return 1
  splice "$2" "$tmp/metrics.md" pfr-recorder metrics
}

# Each (bin sample doc) of the run, the paths relative to the tree.
declare -a jobs=()
metrics_tool=""
if [ "$1" = "--program" ]; then
  [ $# -eq 4 ] || usage
  jobs+=("$2" "$3" "$4")
  base=$PWD
else
  [ $# -eq 1 ] || usage
  build=$1
  # where CMake puts each program: the folder of its CMakeLists.txt
  for spec in "recorder/pfr-recorder config/recorder.ini" "shipper/pfr-shipper config/shipper.ini" \
    "query/pfr -"; do
    read -r path sample <<<"$spec"
    bin=$build/$path
    if [ ! -x "$bin" ]; then
      echo "gen-config-docs: no $bin (build it first)" >&2
      exit 2
    fi
    jobs+=("$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")" "$sample" "docs/configuration.md")
  done
  metrics_tool=$build/recorder/pfr-recorder-metrics
  if [ ! -x "$metrics_tool" ]; then
    echo "gen-config-docs: no $metrics_tool (build it first)" >&2
    exit 2
  fi
  base=$root
fi

abs() { case "$1" in /*|-) echo "$1" ;; *) echo "$base/$1" ;; esac; }

if [ $check -eq 0 ]; then
  for ((i = 0; i < ${#jobs[@]}; i += 3)); do
    generate "$(abs "${jobs[i]}")" "$(abs "${jobs[i+1]}")" "$(abs "${jobs[i+2]}")" || status=1
  done
  if [ -n "$metrics_tool" ]; then
    generate_metrics "$metrics_tool" "$root/docs/operations.md" || status=1
  fi
  exit $status
fi

# --check: the same into copies, then compare.
declare -A copy=()
for ((i = 0; i < ${#jobs[@]}; i += 3)); do
  for f in "${jobs[i+1]}" "${jobs[i+2]}"; do
    [ "$f" = "-" ] && continue
    src=$(abs "$f")
    if [ -z "${copy[$src]:-}" ]; then
      copy[$src]="$tmp/copy.${#copy[@]}.$(basename "$src")"
      cp "$src" "${copy[$src]}"
    fi
  done
done
if [ -n "$metrics_tool" ]; then
  src=$root/docs/operations.md
  copy[$src]="$tmp/copy.${#copy[@]}.operations.md"
  cp "$src" "${copy[$src]}"
  generate_metrics "$metrics_tool" "${copy[$src]}" || status=1
fi
for ((i = 0; i < ${#jobs[@]}; i += 3)); do
  s=${jobs[i+1]}
  [ "$s" != "-" ] && s=${copy[$(abs "$s")]}
  generate "$(abs "${jobs[i]}")" "$s" "${copy[$(abs "${jobs[i+2]}")]}" || status=1
done
for src in "${!copy[@]}"; do
  if ! diff -u "$src" "${copy[$src]}" >"$tmp/diff"; then
    sed "s|${copy[$src]}|$src (generated)|" "$tmp/diff"
    echo "gen-config-docs: $src differs from what the programs print; run" \
      "scripts/gen-config-docs.sh BUILD_DIR and commit the result" >&2
    status=1
  fi
done
exit $status
