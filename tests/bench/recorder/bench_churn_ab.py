#!/usr/bin/env python3
"""What a new process costs the recorder: two pfr-recorder binaries (an older build and this
one) in turn, --rounds times, on the workload of bench_recorder.py (2 spinners, 300 idle
processes) plus bench_churn starting --churn-rate short-lived processes a second. For each run:
the recorder's CPU per minute over --seconds after --warmup (from a cgroup of its own, to the
microsecond), the new processes it saw per minute (its debug log), and the CPU per process
seen. Prints each run and the medians side by side.

How many of the churn's processes get sampled varies a lot from run to run (each lives about
1.5 ms of CPU), which is why the figure to compare is the CPU per process seen.

With --ring RING each run starts on a fresh copy of that ring instead of an empty one (a
recorder's cost may grow with what its ring holds); --churn-rate 0 leaves the churn out.

Usage (as root): bench_churn_ab.py --old OLD_RECORDER --new NEW_RECORDER --bench-dir DIR
                     [--churn-rate 100] [--rounds 3] [--warmup 20] [--seconds 20]
                     [--ring RING]
  DIR: the build's tests/bench/recorder (bench_spinner, bench_idler, bench_churn)
To build an older recorder without touching the tree:
  git worktree add /tmp/old REV && cmake -S /tmp/old -B /tmp/old/build \\
      -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build /tmp/old/build --target pfr-recorder
"""
import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from bpfstats import CpuGroup, host_workload, loadavg

SEEN = re.compile(r"processes\{seen=(\d+)")


def seen(log):
    """New processes the recorder has met so far, from the last interval's debug line."""
    with open(log, errors="replace") as f:
        found = SEEN.findall(f.read())
    return int(found[-1]) if found else 0


def run(binary, name, args, tmp, work):
    group = CpuGroup("pfr-churn-ab-" + name)
    log = os.path.join(tmp, name + ".log")
    db = os.path.join(tmp, name + ".db")
    if args.ring:
        shutil.copy(args.ring, db)
    try:
        with open(log, "w") as lf:
            proc = subprocess.Popen([binary, "--store", db,
                                     "--cpu-hz", "100", "--interval", "10", "--log-level",
                                     "debug"], stdout=lf, stderr=subprocess.STDOUT,
                                    preexec_fn=group.join)
        try:
            work.roll_call()  # the idle processes are met in the warm-up, not in the window
            time.sleep(args.warmup)
            u0, s0 = group.usage_s(), seen(log)
            time.sleep(args.seconds)
            u1, s1 = group.usage_s(), seen(log)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait()
    finally:
        group.close()
        if args.ring:  # a copy per run: do not keep them all
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(db + suffix):
                    os.remove(db + suffix)
    n = s1 - s0  # debug lines come every 10 s: about --seconds' worth of intervals
    return {"cpu_ms_min": (u1 - u0) * 1e3 * 60 / args.seconds,
            "seen_min": n * 60 / args.seconds,
            "us_per_process": (u1 - u0) * 1e6 / n if n > 0 else 0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--bench-dir", required=True)
    ap.add_argument("--churn-rate", type=float, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=float, default=30)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--ring", help="start each run on a copy of this ring")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: needs root")
        return 77
    probe = CpuGroup("pfr-churn-ab-probe")
    probe.close()
    if probe.path is None:
        print("SKIP: no cgroup v2 hierarchy to measure in")
        return 77
    b = args.bench_dir
    tmp = tempfile.mkdtemp(prefix="pfr-churn-ab-")
    res = {"old": [], "new": []}
    try:
        with host_workload(os.path.join(b, "bench_idler"), os.path.join(b, "bench_spinner"), 300,
                           tmp, os.path.join(b, "bench_churn"), args.churn_rate) as work:
            for r in range(args.rounds):
                for name, binary in (("old", args.old), ("new", args.new)):
                    m = run(binary, "%s%d" % (name, r + 1), args, tmp, work)
                    res[name].append(m)
                    print("round %d %-3s: %5.0f ms CPU/min, %5.0f new processes seen/min, %4.0f us "
                          "CPU per process seen (load %.1f)"
                          % (r + 1, name, m["cpu_ms_min"], m["seen_min"], m["us_per_process"],
                             loadavg()), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print("Recorder under churn (%.0f new processes/s)%s, %d rounds x %.0f s, medians"
          % (args.churn_rate, ", each on a copy of %s" % args.ring if args.ring else "",
             args.rounds, args.seconds))
    print("| recorder | CPU ms/min | new processes seen/min | CPU us per process seen |")
    print("|---|---|---|---|")
    for name, ms in res.items():
        med = {k: statistics.median(m[k] for m in ms) for k in ms[0]}
        print("| %s | %.0f | %.0f | %.0f |"
              % (name, med["cpu_ms_min"], med["seen_min"], med["us_per_process"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
