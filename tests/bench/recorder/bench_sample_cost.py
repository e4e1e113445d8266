#!/usr/bin/env python3
"""The three profilers of bench_recorder.py running at the same time on the same workload, so
the host's noise (other VMs, the interrupt cost of the moment) weighs on all three alike and
each window compares them pairwise: per profiler, the workload's time lost in its sampling
interrupts (per sample and per minute), its process CPU and its BPF run time.

The interrupts are told apart by phase (spinner_gaps.py), so each profiler needs a period of its
own: pfr samples at 100 Hz, perf at 99 Hz and bpftrace, here only, at 98 Hz (a cost per sample
does not depend on the rate). The phases are found once all three run: a new perf event on a
CPU restarts the sampling timers of the events already there. The profilers also profile one
another here; that adds little (they are mostly asleep), and alike.

With --old-recorder, an earlier pfr-recorder runs beside them at 97 Hz (its per-minute figures
scaled to the 100 Hz both run at elsewhere), so a change to the sampler is measured against
the version before it and against the peers in one run.

Usage: bench_sample_cost.py --recorder BIN --spinner BIN --idler BIN [--windows 9]
                            [--seconds 20] [--idlers 300] [--churn BIN --churn-rate N]
                            [--old-recorder BIN]
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
from bench_recorder import (NCPU, host_unready, make_tools, recorder_tool, tool_cpu_s, vm_hwm_kib,
                            wait_for, workload_args)
from bpfstats import CpuGroup, host_workload, prog_run_ns

FIND_S = 6  # seconds of a profiler's gaps to find its phase


def snapshot(work):
    return [spinner_gaps.read(f) for f in work.files]


class Running:
    """A profiler started in a cgroup of its own, and its phase bins (one window start per
    spinner)."""

    def __init__(self, tool, tmp):
        self.tool, self.period = tool, 10**9 // tool.hz  # the kernel's cpu-clock period
        self.group = CpuGroup("pfr-cost-" + tool.name.replace(" ", "-"))
        self.log = os.path.join(tmp, tool.name.replace(" ", "-") + ".log")
        with open(self.log, "w") as lf:
            self.proc = subprocess.Popen(tool.argv, stdout=lf, stderr=subprocess.STDOUT,
                                         preexec_fn=self.group.join)
        if tool.ready and not wait_for(self.log, tool.ready, 60, self.proc):
            raise RuntimeError("%s did not start: %s" % (tool.name, open(self.log).read()[-2000:]))
        self.bins = []

    def find_phase(self, s0, s1):
        """Its window on each spinner: the fullest at its period between two snapshots. Returns
        the share of its expected samples seen there."""
        folded = spinner_gaps.fold(s0, s1, self.period)
        seen = 0.0
        for counts, ns in folded:
            b = spinner_gaps.peak(counts)
            self.bins.append(b)
            seen += spinner_gaps.excess_at(counts, ns, b)[0]
        return seen / (self.tool.hz * FIND_S * len(folded))

    def stop(self):
        self.proc.send_signal(self.tool.stop_sig)
        try:
            self.proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.group.close()


def measure(run, rate, s0, s1, cpu, bpf, dt):
    folded = spinner_gaps.fold(s0, s1, run.period)
    n = ns = 0.0
    for (counts, gap_ns), b in zip(folded, run.bins):
        en, es = spinner_gaps.excess_at(counts, gap_ns, b)
        n, ns = n + en, ns + es
    per_sample = ns / n if n > 0 else 0.0
    irq = per_sample * rate * NCPU * 60 / 1e9
    proc = cpu / dt * 60
    return {"us": per_sample / 1e3, "irq": irq, "proc": proc, "bpf": bpf / dt * 60,
            "full": proc + irq, "seen_hz": n / dt / NCPU}


def print_table(names, fig):
    print("| profiler | in sampling interrupts, us/sample | interrupts, s/min | process, s/min |"
          " BPF run time, s/min | process + interrupts, s/min | % of machine |")
    print("|---|---|---|---|---|---|---|")
    for n in names:
        m = fig[n]
        print("| %s | %.1f | %.3f | %.3f | %.3f | %.3f | %.3f %% |"
              % (n, m["us"], m["irq"], m["proc"], m["bpf"], m["full"],
                 100 * m["full"] / (NCPU * 60)))


def main():
    ap = argparse.ArgumentParser()
    workload_args(ap)
    ap.add_argument("--windows", type=int, default=9)
    ap.add_argument("--old-recorder", help="an earlier pfr-recorder, run beside at 97 Hz")
    args = ap.parse_args()
    why = host_unready(ap, args)
    if why:
        print("SKIP: " + why)
        return 77
    tmp = tempfile.mkdtemp(prefix="pfr-bench-cost-")
    tools = [t for t in make_tools(args, tmp) if t.argv]
    bt = tools[2]
    assert bt.name == "bpftrace"
    bt.hz = 98  # its phase; its figures per minute stay at the 99 Hz it runs at elsewhere
    rate = {t.name: t.hz for t in tools}
    rate["bpftrace"] = 99
    bt.argv = [a.replace("hz:99", "hz:98") for a in bt.argv]
    if args.old_recorder:
        old = recorder_tool("pfr (old)", args.old_recorder, os.path.join(tmp, "old.db"), 97)
        tools.insert(1, old)
        rate[old.name] = 100
    runs, rows, rss = [], {t.name: [] for t in tools}, {}
    try:
        with host_workload(args.idler, args.spinner, args.idlers, tmp, args.churn,
                           args.churn_rate) as work:
            for t in tools:
                runs.append(Running(t, tmp))
            time.sleep(2)
            s0 = snapshot(work)
            time.sleep(FIND_S)
            s1 = snapshot(work)
            for r in runs:
                share = r.find_phase(s0, s1)
                print("%-13s %d Hz, phase found at bins %s (%.0f %% of its samples seen there)"
                      % (r.tool.name, r.tool.hz, r.bins, 100 * share), flush=True)
                if share < 0.5:
                    raise RuntimeError("%s: its sampling interrupts were not found" % r.tool.name)
            # after the phases are found: the roll call's bursts take the spinners' time
            work.roll_call()
            time.sleep(max(0.0, args.warmup - FIND_S - 2))
            for w in range(args.windows):
                s0, t0 = snapshot(work), time.time()
                c0 = [tool_cpu_s(r.group, r.proc) for r in runs]
                b0 = [prog_run_ns(r.proc.pid) for r in runs]
                time.sleep(args.seconds)
                s1, t1 = snapshot(work), time.time()
                c1 = [tool_cpu_s(r.group, r.proc) for r in runs]
                b1 = [prog_run_ns(r.proc.pid) for r in runs]
                line = []
                for i, r in enumerate(runs):
                    bpf = sum(b1[i].get(k, 0) - v for k, v in b0[i].items()) / 1e9
                    m = measure(r, rate[r.tool.name], s0, s1, c1[i] - c0[i], bpf, t1 - t0)
                    rows[r.tool.name].append(m)
                    line.append("%s %.1f us (%.0f/s) %.3f + %.3f = %.3f s/min"
                                % (r.tool.name, m["us"], m["seen_hz"], m["proc"], m["irq"],
                                   m["full"]))
                print("window %d: %s" % (w + 1, " | ".join(line)), flush=True)
            rss = {r.tool.name: vm_hwm_kib(r.proc.pid) / 1024 for r in runs}
    finally:
        for r in runs:
            r.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    names = [t.name for t in tools]
    print()
    print("Profilers at the same time, %d CPUs, %d spinners + %d idle processes%s, %d windows x"
          " %.0f s, medians" % (NCPU, NCPU, args.idlers,
                                " + %.0f new processes/s" % args.churn_rate
                                if args.churn_rate else "", args.windows, args.seconds))
    med = {n: {k: statistics.median(m[k] for m in rows[n]) for k in rows[n][0]} for n in names}
    mean = {n: {k: statistics.fmean(m[k] for m in rows[n]) for k in rows[n][0]} for n in names}
    print_table(names, med)
    print("\nmeans: all windows together, so work done once a minute (pfr's /proc scan) weighs"
          " what it costs")
    print_table(names, mean)
    print("peak RSS (VmHWM after the last window): %s"
          % ", ".join("%s %.1f MiB" % (n, rss[n]) for n in names))
    pfr = names[0]
    for peer in names[1:]:
        ratios = [a["full"] / b["full"] for a, b in zip(rows[pfr], rows[peer]) if b["full"] > 0]
        per_sample = [a["us"] - b["us"] for a, b in zip(rows[pfr], rows[peer])]
        lower = sum(a["full"] < b["full"] for a, b in zip(rows[pfr], rows[peer]))
        print("pfr / %s: process + interrupts %.2fx (median of the windows' ratios; lower in %d"
              " of %d), %.2fx over all windows, per sample %+.1f us"
              % (peer, statistics.median(ratios), lower, args.windows,
                 mean[pfr]["full"] / mean[peer]["full"], statistics.median(per_sample)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
