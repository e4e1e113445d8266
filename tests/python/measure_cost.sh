#!/bin/sh
# measure_cost.sh MODE [SECONDS] [recorder flags]: the sampler's cost per sample of one
# py_truth.py workload (as root, from the source tree; PFR_BUILD: the build tree, build-gcc):
# the native walk and the interpreter frames, from the recorder's debug log (docs/python.md).
B=${PFR_BUILD:-build-gcc}
M=$1; S=${2:-10}
shift; [ $# -gt 0 ] && shift
D=$(mktemp -d /tmp/pfr-pycost.XXXX)
$B/recorder/pfr-recorder --store $D/ring.db --interval 2 --cpu-hz 99 --metrics-listen off \
  --go-heap-profiler disabled --scrape-local off --log-level debug "$@" > $D/log 2>&1 &
R=$!
i=0
while ! grep -q ": sampling with" $D/log; do
  i=$((i + 1)); [ $i -lt 300 ] || { cat $D/log; exit 1; }
  sleep 0.2
done
/usr/bin/python3.11 $(dirname "$0")/workloads/py_truth.py $M $S > /dev/null
sleep 2.5
kill -TERM $R; wait $R
grep "python: samples" $D/log | tail -1 | grep -o "samples=[0-9]* walked=[0-9]*\|frames=[0-9]*\|bpf_ns_per_sample{[^}]*}"
rm -rf $D
