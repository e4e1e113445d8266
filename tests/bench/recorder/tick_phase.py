#!/usr/bin/env python3
"""Does pfr's sampling interrupt cost depend on where its 100 Hz phase falls against the
scheduler tick's? The spinners (one per CPU) and 50 idle processes run; first with no profiler,
to find the tick's peaks in the 100 Hz fold of the spinners' gaps, then the recorder is started
RUNS times, alone, each time finding its phase and measuring its cost per sample over 12 s.
Prints, per start, the distance of its window from the nearest tick peak and its cost.

Usage (as root): tick_phase.py [--build BUILD] [RUNS]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import spinner_gaps
from bpfstats import host_workload

PERIOD = 10**7  # pfr's 100 Hz


def snap(work):
    return [spinner_gaps.read(f) for f in work.files]


def tick_peaks(work):
    """Per spinner, the bins far above the median with no profiler running: the tick's."""
    s0 = snap(work)
    time.sleep(8)
    peaks = []
    for counts, _ in spinner_gaps.fold(s0, snap(work), PERIOD):
        med = statistics.median(counts)
        top = sorted(range(len(counts)), key=lambda i: -counts[i])[:12]
        peaks.append(sorted(i for i in top if counts[i] > med + 20))
    return peaks


def one_start(args, work, tmp, r, peaks):
    p = subprocess.Popen([os.path.join(args.build, "recorder", "pfr-recorder"), "--store",
                          os.path.join(tmp, "r%d.db" % r)], stderr=subprocess.DEVNULL)
    try:
        time.sleep(3)
        a = snap(work)
        time.sleep(5)
        bins = [spinner_gaps.peak(c) for c, _ in spinner_gaps.fold(a, snap(work), PERIOD)]
        c0 = snap(work)
        time.sleep(12)
        n = ns = 0.0
        for (cnt, gap_ns), b in zip(spinner_gaps.fold(c0, snap(work), PERIOD), bins):
            en, es = spinner_gaps.excess_at(cnt, gap_ns, b)
            n, ns = n + en, ns + es
    finally:
        p.terminate()
        p.wait()
    nb = 10**7 // 2000

    def dist(b, ts):
        mid = b + spinner_gaps.WINDOW_BINS // 2
        return min([min((mid - t) % nb, (t - mid) % nb) for t in ts] or [nb])
    print("start %d: window at bins %s, %s bins (2 us) from the nearest tick peak, %.1f us a"
          " sample over %.0f samples" % (r + 1, bins, [dist(b, t) for b, t in zip(bins, peaks)],
                                         ns / n / 1e3 if n else 0.0, n), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                                    "build-rel"))
    ap.add_argument("runs", type=int, nargs="?", default=8)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: needs root")
        return 77
    bench = os.path.join(args.build, "tests", "bench", "recorder")
    tmp = tempfile.mkdtemp(prefix="pfr-tick-phase-")
    try:
        with host_workload(os.path.join(bench, "bench_idler"), os.path.join(bench, "bench_spinner"),
                           50, tmp) as work:
            time.sleep(1)
            peaks = tick_peaks(work)
            print("tick peaks per spinner (bins of 2 us in the 100 Hz fold): %s" % peaks)
            for r in range(args.runs):
                one_start(args, work, tmp, r, peaks)
                time.sleep(1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
