#!/usr/bin/env bash
# What a new process costs the recorder: two pfr-recorder binaries (an older build and this one)
# in turn, ROUNDS times, on one host whose 2 spinners keep the CPUs busy, 300 idle processes
# wait, and bench_churn starts CHURN short-lived processes a second (`ls -l /usr/lib`). For
# each run: the recorder's CPU per minute over the last SECONDS of WARMUP + SECONDS (from a
# cgroup v2 group of its own, to the microsecond), the new processes it saw per minute (its
# debug log), and the CPU per process seen. Prints each run and the medians side by side.
#
# How many of the churn's processes get sampled varies a lot from run to run (each lives about
# 1.5 ms of CPU), which is why the figure to compare is the CPU per process seen.
#
# Usage (as root): bench_churn_ab.sh OLD_RECORDER NEW_RECORDER BENCH_DIR
#   BENCH_DIR: the build's tests/bench/recorder (bench_spinner, bench_idler, bench_churn)
#   environment: CHURN (100), ROUNDS (3), WARMUP (20), SECONDS_MEASURED (20)
# To build an older recorder without touching the tree:
#   git worktree add /tmp/old REV && cmake -S /tmp/old -B /tmp/old/build \
#       -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build /tmp/old/build --target pfr-recorder
set -euo pipefail
OLD=${1:?old recorder}
NEW=${2:?new recorder}
BIN=${3:?bench dir}
CHURN=${CHURN:-100}
ROUNDS=${ROUNDS:-3}
WARMUP=${WARMUP:-20}
MEASURED=${SECONDS_MEASURED:-20}
[ "$(id -u)" = 0 ] || {
    echo "SKIP: needs root"
    exit 77
}
CGROOT=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
[ -n "$CGROOT" ] || {
    echo "SKIP: no cgroup v2 hierarchy"
    exit 77
}

T=$(mktemp -d /tmp/pfr-churn-ab.XXXXXX)
PIDS=()
REC=""
cleanup() {
    [ -n "$REC" ] && kill "$REC" 2>/dev/null
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rmdir "$CGROOT"/pfr-churn-ab-$$-* 2>/dev/null || true
    rm -rf "$T"
}
trap cleanup EXIT

for _ in $(seq 300); do
    "$BIN/bench_idler" 3 &
    PIDS+=("$!")
done
for i in 0 1; do
    "$BIN/bench_spinner" "$T/spin$i" &
    PIDS+=("$!")
done
"$BIN/bench_churn" "$CHURN" /bin/ls -l /usr/lib &
PIDS+=("$!")
sleep 2

usage_us() { awk '/^usage_usec/ {print $2}' "$1/cpu.stat"; }
seen() { grep -o 'processes{seen=[0-9]*' "$1" | tail -1 | grep -o '[0-9]*$' || echo 0; }

declare -A per_process cpu_min seen_min
for r in $(seq "$ROUNDS"); do
    for v in old new; do
        bin=$OLD
        [ "$v" = new ] && bin=$NEW
        cg=$CGROOT/pfr-churn-ab-$$-$v-$r
        mkdir "$cg"
        log=$T/$v$r.log
        (echo 0 >"$cg/cgroup.procs" && exec "$bin" --store "$T/$v.db" --cpu-hz 100 --interval 10 \
            --log-level debug >"$log" 2>&1) &
        REC=$!
        sleep "$WARMUP"
        u0=$(usage_us "$cg")
        s0=$(seen "$log")
        sleep "$MEASURED"
        u1=$(usage_us "$cg")
        s1=$(seen "$log")
        kill -TERM "$REC"
        wait "$REC" || true
        REC=""
        rmdir "$cg"
        n=$((s1 - s0))
        cpu_min[$v$r]=$(((u1 - u0) * 60 / MEASURED / 1000))
        seen_min[$v$r]=$((n * 60 / MEASURED))
        per_process[$v$r]=$((n > 0 ? (u1 - u0) / n : 0))
        printf 'round %d %-3s: %5d ms CPU/min, %5d new processes seen/min, %4d us CPU per process seen (load %s)\n' \
            "$r" "$v" "${cpu_min[$v$r]}" "${seen_min[$v$r]}" "${per_process[$v$r]}" \
            "$(cut -d' ' -f1 /proc/loadavg)"
    done
done

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : int((a[NR / 2] + a[NR / 2 + 1]) / 2)}'; }
echo
echo "Recorder under churn ($CHURN new processes/s), $ROUNDS rounds x ${MEASURED} s, medians"
echo "| recorder | CPU ms/min | new processes seen/min | CPU us per process seen |"
echo "|---|---|---|---|"
for v in old new; do
    c=() s=() p=()
    for r in $(seq "$ROUNDS"); do
        c+=("${cpu_min[$v$r]}")
        s+=("${seen_min[$v$r]}")
        p+=("${per_process[$v$r]}")
    done
    echo "| $v | $(median "${c[@]}") | $(median "${s[@]}") | $(median "${p[@]}") |"
done
