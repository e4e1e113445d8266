#!/usr/bin/env bash
# Runs the store benchmark from an existing build (it builds nothing): a release tree is best.
#   tests/bench/store/run.sh BUILD_DIR [WORKDIR] [bench_store options: --chunks N --runs N --go-runs N]
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR [WORKDIR] [options]}
shift
work=${1:-}
if [[ -n "$work" && "$work" != --* ]]; then shift; else work=$(mktemp -d /tmp/pfr-bench-store-XXXXXX); fi
go=/usr/lib/go-1.19/bin/go
[[ -x "$go" ]] || go=$(command -v go || true)
bin="$build/tests/bench/store/bench_store"
[[ -x "$bin" ]] || { echo "no $bin: build the tree first (cmake --build $build --target bench_store)" >&2; exit 1; }
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $bin $work ${go:-} $*"
"$bin" "$work" "${go:-}" "$@"
rm -rf "$work/pprof" "$work/files" "$work"/*.db "$work"/*.pb.gz
