#!/usr/bin/env python3
"""What a new process costs the recorder: two pfr-recorder binaries (an older build and this
one) in turn, --rounds times, on the workload of bench_recorder.py (2 spinners, 300 idle
processes) plus bench_churn starting --churn-rate short-lived processes a second. For each run:
the recorder's CPU per minute over --seconds after --warmup (from a cgroup of its own, to the
microsecond), the new processes it saw per minute (its debug log), and the CPU per process
seen, and its peak RSS (VmHWM at the end of the run). Prints each run and the medians side by
side.

How many of the churn's processes get sampled varies a lot from run to run (each lives about
1.5 ms of CPU), which is why the figure to compare is the CPU per process seen.

With --ring RING each run starts on a fresh copy of that ring instead of an empty one (a
recorder's cost may grow with what its ring holds); --churn-rate 0 leaves the churn out.

With --together both run at the same time, each in its own cgroup, for --rounds windows of
--seconds after one warm-up: each window compares them under the same load (rounds in turn on
this shared host move by more than a per-interval saving). Under churn the two samplers interact:
each one's sampling interrupts move what the other samples (in one run one of them took 3x the
other's samples of exiting processes and met 10 % fewer processes), so there compare the CPU per
process seen, and confirm with rounds in turn and a profile.

Usage (as root): bench_churn_ab.py --old OLD_RECORDER --new NEW_RECORDER --bench-dir DIR
                     [--churn-rate 100] [--rounds 3] [--warmup 30] [--seconds 20]
                     [--ring RING] [--together]
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

from bench_recorder import vm_hwm_kib
from bpfstats import CpuGroup, host_workload, loadavg

SEEN = re.compile(r"processes\{seen=(\d+)")


def seen(log):
    """New processes the recorder has met so far, from the last interval's debug line."""
    with open(log, errors="replace") as f:
        found = SEEN.findall(f.read())
    return int(found[-1]) if found else 0


def start(binary, name, args, tmp):
    """A recorder in a cgroup of its own, logging at debug level."""
    r = {"group": CpuGroup("pfr-churn-ab-" + name), "log": os.path.join(tmp, name + ".log"),
         "db": os.path.join(tmp, name + ".db"), "proc": None}
    if args.ring:
        shutil.copy(args.ring, r["db"])
    try:
        with open(r["log"], "w") as lf:
            r["proc"] = subprocess.Popen([binary, "--store", r["db"], "--metrics-listen",
                                          "127.0.0.1:0", "--cpu-hz", "100", "--interval", "10",
                                          "--log-level", "debug"], stdout=lf,
                                         stderr=subprocess.STDOUT, preexec_fn=r["group"].join)
    except BaseException:
        stop(r)
        raise
    return r


def stop(r):
    if r["proc"]:
        r["proc"].send_signal(signal.SIGTERM)
        r["proc"].wait()
    r["group"].close()
    for suffix in ("", "-wal", "-shm"):  # a ring per run: do not keep them all
        if os.path.exists(r["db"] + suffix):
            os.remove(r["db"] + suffix)


def mark(r):
    return r["group"].usage_s(), seen(r["log"])


def figures(a, b, seconds):
    """CPU and processes met between two marks."""
    (u0, s0), (u1, s1) = a, b
    n = s1 - s0  # debug lines come every 10 s: about --seconds' worth of intervals
    return {"cpu_ms_min": (u1 - u0) * 1e3 * 60 / seconds,
            "seen_min": n * 60 / seconds,
            "us_per_process": (u1 - u0) * 1e6 / n if n > 0 else 0}


def run(binary, name, args, tmp, work):
    r = start(binary, name, args, tmp)
    try:
        work.roll_call()  # the idle processes are met in the warm-up, not in the window
        time.sleep(args.warmup)
        a = mark(r)
        time.sleep(args.seconds)
        m = figures(a, mark(r), args.seconds)
        m["rss_mib"] = vm_hwm_kib(r["proc"].pid) / 1024
        return m
    finally:
        stop(r)


def in_turn(args, tmp, work, res):
    for rnd in range(args.rounds):
        for name, binary in (("old", args.old), ("new", args.new)):
            m = run(binary, "%s%d" % (name, rnd + 1), args, tmp, work)
            res[name].append(m)
            print("round %d %-3s: %5.1f ms CPU/min, %5.0f new processes seen/min, %4.0f us "
                  "CPU per process seen, peak RSS %.1f MiB (load %.1f)"
                  % (rnd + 1, name, m["cpu_ms_min"], m["seen_min"], m["us_per_process"],
                     m["rss_mib"], loadavg()), flush=True)


def together(args, tmp, work, res):
    """Both recorders at once, so every window compares them under the same load."""
    recs = {}
    try:
        for name, binary in (("old", args.old), ("new", args.new)):
            recs[name] = start(binary, name, args, tmp)
        work.roll_call()
        time.sleep(args.warmup)
        marks = {name: mark(r) for name, r in recs.items()}
        for w in range(args.rounds):
            time.sleep(args.seconds)
            now = {name: mark(r) for name, r in recs.items()}
            line = []
            for name in recs:
                m = figures(marks[name], now[name], args.seconds)
                res[name].append(m)
                line.append("%s %5.1f ms CPU/min, %4.0f new processes seen/min"
                            % (name, m["cpu_ms_min"], m["seen_min"]))
            marks = now
            print("window %d: %s (load %.1f)" % (w + 1, " | ".join(line), loadavg()), flush=True)
        for name, r in recs.items():  # once, at the end: the same figure for every window
            for m in res[name]:
                m["rss_mib"] = vm_hwm_kib(r["proc"].pid) / 1024
    finally:
        for r in recs.values():
            stop(r)


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
    ap.add_argument("--together", action="store_true",
                    help="run both at once; --rounds windows of --seconds after one warm-up")
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
            (together if args.together else in_turn)(args, tmp, work, res)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print("Recorder under churn (%.0f new processes/s)%s, %s, %d %s x %.0f s"
          % (args.churn_rate, ", each on a copy of %s" % args.ring if args.ring else "",
             "at the same time" if args.together else "in turn", args.rounds,
             "windows" if args.together else "rounds", args.seconds))
    print("| recorder | CPU ms/min, median (mean) | new processes seen/min | "
          "CPU us per process seen | peak RSS MiB, median (range) |")
    print("|---|---|---|---|---|")
    for name, ms in res.items():
        med = {k: statistics.median(m[k] for m in ms) for k in ms[0]}
        print("| %s | %.1f (%.1f) | %.0f | %.0f | %.1f (%.1f–%.1f) |"
              % (name, med["cpu_ms_min"], statistics.mean(m["cpu_ms_min"] for m in ms),
                 med["seen_min"], med["us_per_process"], med["rss_mib"],
                 min(m["rss_mib"] for m in ms), max(m["rss_mib"] for m in ms)))
    old, new = ([m["cpu_ms_min"] for m in res[k]] for k in ("old", "new"))
    print("new / old: %.2fx over all %s, new lower in %d of %d"
          % (sum(new) / sum(old) if sum(old) else 0, "windows" if args.together else "rounds",
             sum(1 for o, n in zip(old, new) if n < o), len(old)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
