#!/bin/bash
# One busy JVM; the recorder (java_profiler enabled, 10 s intervals) twice on it: the first
# attach starts its listener and Flight Recorder, the second finds both. Per run: the worker
# thread's CPU, the forked children's CPU, the JVM threads that serve the dumps.
B=$(cd "${1:?usage: measure_cost.sh BUILD_DIR}" && pwd); J=/usr/lib/jvm/java-17-openjdk-amd64/bin
W=${TMPDIR:-/tmp}/pfr-java-cost; mkdir -p $W; cd $W; touch empty.ini
$J/java -cp $B/tests/java/classes PfrJavaBusy m2 > jvm2.out 2>&1 & JP=$!
sleep 3
jvm_threads() { # CPU ticks of the JVM threads that attach and JFR use
  for t in /proc/$JP/task/*; do n=$(cat $t/comm); case "$n" in "Attach Listener"|JFR*) awk '{s+=$14+$15} END {print s}' $t/stat;; esac; done | awk '{s+=$1} END {print s+0}'; }
for run in 1 2; do
  rm -rf r2-$run; mkdir r2-$run
  PFR_CONFIG=$W/empty.ini $B/recorder/pfr-recorder --store r2-$run/ring.db --java-profiler enabled --log-level debug --metrics-listen 127.0.0.1:19467 > r2-$run/log 2>&1 & RP=$!
  j0=$(jvm_threads)
  sleep 125
  W=$(grep -l pfr-java /proc/$RP/task/*/comm | head -1 | xargs dirname)
  w=$(awk '{print $14+$15}' $W/stat); c=$(awk '{print $16+$17}' /proc/$RP/stat)
  j1=$(jvm_threads)
  curl -s 127.0.0.1:19467/metrics | grep -E "^pfr_java_(dumps|dump_seconds|dump_bytes|credential|attach_trig)" > r2-$run/metrics
  kill -TERM $RP; wait $RP
  echo "run $run: worker thread $w ticks, reaped children $c ticks, JVM attach+JFR threads $((j1-j0)) ticks (100 Hz), $(grep 'started in' r2-$run/log)"
  cat r2-$run/metrics
done
kill $JP
