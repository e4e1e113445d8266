#!/usr/bin/env python3
"""Recorder overhead benchmark: pfr-recorder at 100 Hz beside `perf record -F 99 -a -g` and
bpftrace `profile:hz:99 { @[kstack, ustack, comm] = count(); }`, in turn, on the same workload
(2 spinning processes with deep stacks keeping both cores busy, plus mostly idle processes).

For each profiler, per round: its CPU seconds per minute of steady state (its process and
children, from a cgroup v2 group of its own to the microsecond, else utime+stime from /proc in
10 ms ticks; plus the run time of its BPF programs from kernel.bpf_stats_enabled, read from
/proc/PID/fdinfo), the time the spinners lost in its sampling interrupts (spinner_gaps.py: this
holds perf's stack walks, which no CPU figure of the perf process shows, so "process +
interrupts" is the like-for-like figure), its whole-life CPU, its peak RSS (VmHWM) and the
workload's work rate against a run with no profiler, per second and per CPU-second of the
spinners. Each round starts one tool later than the one before. With --churn-rate, bench_churn
also starts that many short-lived processes a second (a busy host). With --old-recorder, an
earlier pfr-recorder takes its turn too, at 100 Hz like the new one: before and after in one
run. Prints medians over the rounds and the ratios. bench_sample_cost.py runs the three at the
same time instead.

Usage: bench_recorder.py --recorder BIN --spinner BIN --idler BIN [--seconds 60] [--warmup 45]
                         [--rounds 3] [--idlers 300] [--churn BIN --churn-rate N]
                         [--old-recorder BIN] [--markdown]
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import spinner_gaps
from bpfstats import CpuGroup, host_workload, loadavg, prog_run_ns, task_cpu_ns, threads

TICK = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count()


def proc_cpu_s(pid):
    """utime + stime of a process (all its threads), seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def vm_hwm_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def forks():
    """Processes created since boot (/proc/stat), to show how busy the rest of the host was."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("processes "):
                return int(line.split()[1])
    return 0


def wait_for(path, needle, timeout, proc):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            return False
        try:
            with open(path, errors="replace") as f:
                if needle in f.read():
                    return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


class Tool:
    def __init__(self, name, argv, ready, stop_sig, hz=0):
        self.name, self.argv, self.ready, self.stop_sig, self.hz = name, argv, ready, stop_sig, hz


def recorder_tool(name, binary, store, hz):
    """A pfr-recorder writing to store, sampling at hz."""
    return Tool(name, [binary, "--store", store, "--cpu-hz", str(hz), "--interval", "10"],
                ": sampling with", signal.SIGTERM, hz)


def make_tools(args, tmp):
    bt = "profile:hz:99 { @[kstack, ustack, comm] = count(); }"
    return [
        Tool("baseline", None, None, None),
        recorder_tool("pfr-recorder", args.recorder, os.path.join(tmp, "ring.db"), 100),
        Tool("perf record", ["perf", "record", "-F", "99", "-a", "-g", "-q", "-o",
                             os.path.join(tmp, "perf.data")], None, signal.SIGINT, 99),
        Tool("bpftrace", ["bpftrace", "-e", bt], "Attaching", signal.SIGINT, 99),
    ] + ([recorder_tool("pfr (old)", args.old_recorder, os.path.join(tmp, "old.db"), 100)]
         if args.old_recorder else [])


def reap_cpu_s(proc, timeout):
    """Waits for proc (killing it after timeout s) and returns its user + system CPU seconds."""
    end = time.time() + timeout
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = status
            return ru.ru_utime + ru.ru_stime
        if time.time() > end:
            proc.kill()
        time.sleep(0.05)


def tool_cpu_s(group, proc):
    """The tool's CPU seconds so far: from its cgroup (microseconds, exited threads and children
    included) when there is one, else from /proc (10 ms ticks)."""
    v = group.usage_s()
    return v if v is not None else proc_cpu_s(proc.pid)


THREADS = ("main", "pfr-cpu", "pfr-unwind", "pfr-notify")


def thread_cpu_ns(pid):
    """CPU ns of each of a recorder's threads so far (bpfstats.threads), by name: the main
    thread (the ring's writes), pfr-cpu (drains, profiles), pfr-unwind, pfr-notify; the rest as
    "other". Threads gone since are not counted."""
    out = dict.fromkeys(THREADS + ("other",), 0)
    for tid, comm, ns, _ in threads(pid):
        name = "main" if tid == pid else comm if comm in THREADS else "other"
        out[name] += ns
    return out


def wakes(pid):
    """Context switches of a process's threads so far (voluntary + involuntary): each is a
    wake-up, which on a shared VM costs far more than the work of an idle daemon's thread
    (bench_wake). Threads gone since are not counted."""
    return sum(t[3] for t in threads(pid))


def workload_cpu_s(pids):
    return sum(task_cpu_ns(p) for p in pids) / 1e9


def run_phase(tool, args, tmp, work):
    proc = None
    log = os.path.join(tmp, "tool.log")
    group = CpuGroup("pfr-bench-" + tool.name.replace(" ", "-"))
    try:
        born = time.time()
        if tool.argv:
            with open(log, "w") as lf:
                proc = subprocess.Popen(tool.argv, stdout=lf, stderr=subprocess.STDOUT,
                                        preexec_fn=group.join)
            if tool.ready and not wait_for(log, tool.ready, 60, proc):
                raise RuntimeError("%s did not start: %s" % (tool.name, open(log).read()[-2000:]))
        work.roll_call()  # the idle processes are met in the warm-up, not in the window
        time.sleep(args.warmup)
        s0 = [spinner_gaps.read(f) for f in work.files]
        t0, f0, w0 = time.time(), forks(), workload_cpu_s(work.pids)
        cpu0 = tool_cpu_s(group, proc) if proc else 0
        bpf0 = prog_run_ns(proc.pid) if proc else {}
        thr0 = thread_cpu_ns(proc.pid) if tool.name.startswith("pfr") else {}
        wk0 = wakes(proc.pid) if proc else 0
        time.sleep(args.seconds)
        s1 = [spinner_gaps.read(f) for f in work.files]
        t1, f1, w1 = time.time(), forks(), workload_cpu_s(work.pids)
        cpu1 = tool_cpu_s(group, proc) if proc else 0
        bpf1 = prog_run_ns(proc.pid) if proc else {}
        thr1 = thread_cpu_ns(proc.pid) if tool.name.startswith("pfr") else {}
        wk1 = wakes(proc.pid) if proc else 0
        hwm = vm_hwm_kib(proc.pid) if proc else 0
        life_cpu = 0.0
        if proc:
            # whole life, start and exit included: bpftrace symbolizes and prints its map only
            # when it stops, outside the steady-state window
            proc.send_signal(tool.stop_sig)
            life_cpu = reap_cpu_s(proc, 300)
            in_group = group.usage_s()
            if in_group is not None:
                life_cpu = in_group
        life = time.time() - born
    finally:
        group.close()
    dt = t1 - t0
    bpf_s = sum(bpf1.get(k, 0) - v for k, v in bpf0.items()) / 1e9
    units = spinner_gaps.work_units(s1) - spinner_gaps.work_units(s0)
    # the kernel's cpu-clock period for a frequency f is 1e9 / f ns (integer division)
    irq_n, irq_ns = spinner_gaps.sampler_excess(s0, s1, 10**9 // tool.hz) if tool.hz else (0, 0)
    per_sample_ns = irq_ns / irq_n if irq_n > 0 else 0
    threads = {"thread " + k: (thr1[k] - v) / 1e9 / dt * 60 for k, v in thr0.items()}
    return dict(threads, **{
        "user_sys_per_min": (cpu1 - cpu0) / dt * 60,
        "bpf_per_min": bpf_s / dt * 60,
        "rss_mib": hwm / 1024,
        "work_per_s": units / dt,
        # work per CPU-second the spinners got: blind to other jobs taking the CPUs, but not to
        # the sampling interrupts that run on the spinners' time
        "work_per_cpu_s": units / (w1 - w0) if w1 > w0 else 0,
        "nprogs": len(bpf0),
        "wakes_per_s": (wk1 - wk0) / dt,
        # the workload's time lost in the tool's sampling interrupts, per sample and per minute
        # (at the tool's rate on every CPU), and the samples seen per CPU-second
        "irq_us": per_sample_ns / 1e3,
        "irq_per_min": per_sample_ns * tool.hz * NCPU * 60 / 1e9,
        "irq_seen_hz": irq_n / dt / NCPU,
        "forks_per_s": (f1 - f0) / dt,
        "load": loadavg(),
        # BPF run time is cumulative since load: its value at the stop is the whole life's
        "life_per_min": (life_cpu + sum(bpf1.values()) / 1e9) / life * 60,
    })


def workload_args(ap):
    """The options of the profilers and of the workload (shared with bench_sample_cost.py)."""
    ap.add_argument("--recorder", required=True)
    ap.add_argument("--spinner", required=True)
    ap.add_argument("--idler", required=True)
    ap.add_argument("--seconds", type=float, default=20)
    # the idle processes' roll call (Workload.roll_call) takes ~15 s of both CPUs; then the
    # profilers have met them all and symbolized what they run: steady state
    ap.add_argument("--warmup", type=float, default=45)
    ap.add_argument("--idlers", type=int, default=300)
    ap.add_argument("--churn", help="bench_churn binary, for --churn-rate")
    ap.add_argument("--churn-rate", type=float, default=0,
                    help="short-lived processes started a second (a busy host), default none")


def host_unready(ap, args):
    """Why this host cannot run the benchmark (printed as SKIP), or None."""
    if args.churn_rate > 0 and not args.churn:
        ap.error("--churn-rate needs --churn BIN (tests/bench/recorder/bench_churn)")
    return unready_for(("perf", "bpftrace"))


def unready_for(tools):
    """Why this host cannot run a benchmark that runs the tools given as root, or None."""
    if os.geteuid() != 0:
        return "needs root"
    for tool in tools:
        if not shutil.which(tool):
            return "%s missing (scripts/install-deps.sh --test)" % tool
    return None


def main():
    ap = argparse.ArgumentParser()
    workload_args(ap)
    # a whole minute per window: the recorder's once-a-minute work (the /proc scan of the Go
    # heap profiler and pprof discovery) then weighs what it costs, neither missed nor, in a
    # 20 s window that always holds it, counted three times
    ap.set_defaults(seconds=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--old-recorder", help="an earlier pfr-recorder, in turn with the others")
    ap.add_argument("--wake", help="bench_wake: the host's cost of a wake-up after 10 s asleep,"
                    " measured throughout")
    args = ap.parse_args()
    why = host_unready(ap, args)
    if why:
        print("SKIP: " + why)
        return 77

    tmp = tempfile.mkdtemp(prefix="pfr-bench-recorder-")
    tools = make_tools(args, tmp)
    res = {t.name: [] for t in tools}
    calib = subprocess.Popen([args.wake, "10000"], stdout=subprocess.PIPE, text=True) \
        if args.wake else None
    try:
        with host_workload(args.idler, args.spinner, args.idlers, tmp, args.churn,
                           args.churn_rate) as work:
            for r in range(args.rounds):
                # each round starts one tool later: with 4 rounds every tool takes every place
                # once, so a drift of the host's load does not favour whoever runs first
                for t in tools[r % len(tools):] + tools[:r % len(tools)]:
                    m = run_phase(t, args, tmp, work)
                    res[t.name].append(m)
                    print("round %d %-13s cpu %.3f+%.3f s/min  interrupts %.3f s/min (%.1f us x "
                          "%.0f/s per CPU seen)  wakes %.1f/s  whole life %.3f s/min  rss %.1f "
                          "MiB  work %.0f/s, %.0f per CPU-s  (host: %.0f new processes/s, load "
                          "%.1f)"
                          % (r + 1, t.name, m["user_sys_per_min"], m["bpf_per_min"],
                             m["irq_per_min"], m["irq_us"], m["irq_seen_hz"], m["wakes_per_s"],
                             m["life_per_min"], m["rss_mib"], m["work_per_s"],
                             m["work_per_cpu_s"], m["forks_per_s"], m["load"]), flush=True)
                    if "thread main" in m:
                        print("        threads, s/min: " + "  ".join(
                            "%s %.3f" % (k[7:], m[k]) for k in sorted(m) if
                            k.startswith("thread ")), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if calib:
            calib.send_signal(signal.SIGINT)
    host_wake = calib.communicate()[0].strip() if calib else ""

    med = {}
    for name, ms in res.items():
        med[name] = {k: statistics.median(m[k] for m in ms) for k in ms[0]}
        med[name]["total"] = statistics.median(m["user_sys_per_min"] + m["bpf_per_min"] for m in ms)
        med[name]["full"] = statistics.median(m["user_sys_per_min"] + m["irq_per_min"] for m in ms)
    base = med["baseline"]["work_per_s"]
    base_cpu = med["baseline"]["work_per_cpu_s"]
    machine = NCPU * 60.0
    names = ("pfr-recorder", "perf record", "bpftrace") + (("pfr (old)",) if args.old_recorder
                                                         else ())
    print()
    print("Recorder overhead, %d CPUs, %d spinners + %d idle processes%s, %d rounds x %.0f s,"
          " medians" % (NCPU, NCPU, args.idlers,
                        " + %.0f new processes/s" % args.churn_rate if args.churn_rate else "",
                        args.rounds, args.seconds))
    print("| profiler | CPU s/min (process) | CPU s/min (BPF) | process + BPF | % of machine |"
          " in sampling interrupts, s/min (us/sample) | process + interrupts | % of machine |"
          " whole life, CPU s/min | peak RSS MiB | workload slowdown (wall) |"
          " workload slowdown per CPU-s | host new processes/s | wake-ups/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        m = med[name]
        slow = (1 - m["work_per_s"] / base) * 100 if base else 0
        slow_cpu = (1 - m["work_per_cpu_s"] / base_cpu) if base_cpu else 0
        print("| %s | %.3f | %.3f | %.3f | %.3f %% | %.3f (%.1f) | %.3f | %.3f %% | %.3f | %.1f |"
              " %.2f %% | %.2f %% | %.0f | %.1f |"
              % (name, m["user_sys_per_min"], m["bpf_per_min"], m["total"],
                 100 * m["total"] / machine, m["irq_per_min"], m["irq_us"], m["full"],
                 100 * m["full"] / machine, m["life_per_min"], m["rss_mib"], slow,
                 100 * slow_cpu, m["forks_per_s"], m["wakes_per_s"]))
    print("(process CPU from a cgroup of the profiler's own when cgroup v2 is there, to the"
          " microsecond; whole life: from its start to its exit, start-up, symbolization at exit"
          " and writing out included, plus its BPF programs', per minute of its life)")
    print("(in sampling interrupts: the time the spinners lost in gaps at the profiler's sampling"
          " phase, beyond the background (spinner_gaps.py), per sample and at the profiler's rate"
          " on every CPU. It holds the BPF run time, the interrupt itself (on a VM most of it) and"
          " perf's stack walks, which no CPU figure of perf's process shows: process + interrupts"
          " is the like-for-like cost. The work-rate slowdowns move by a few % from run to run"
          " on a shared VM, more than any of these profilers costs)")
    if host_wake:
        print("(host: %s)" % host_wake)
    for name in names:
        if "thread main" in med[name]:
            print("%s threads, s/min (medians): %s" % (name, "  ".join(
                "%s %.3f" % (k[7:], med[name][k]) for k in sorted(med[name])
                if k.startswith("thread "))))
    p = med["pfr-recorder"]
    for peer in names[1:]:
        q = med[peer]
        print("pfr / %s: process + interrupts %.2fx, process + BPF %.2fx (whole life %.2fx),"
              " RSS %.2fx"
              % (peer, p["full"] / q["full"] if q["full"] else 0,
                 p["total"] / q["total"] if q["total"] else 0,
                 p["life_per_min"] / q["life_per_min"] if q["life_per_min"] else 0,
                 p["rss_mib"] / q["rss_mib"] if q["rss_mib"] else 0))
    wins = {peer: sum(a["user_sys_per_min"] + a["irq_per_min"] <
                      b["user_sys_per_min"] + b["irq_per_min"]
                      for a, b in zip(res["pfr-recorder"], res[peer])) for peer in names[1:]}
    print("rounds where pfr's process + interrupts is the lower: %s"
          % ", ".join("%d of %d against %s" % (w, args.rounds, peer) for peer, w in wins.items()))
    ok = p["full"] <= 0.003 * machine and p["rss_mib"] < 64 and \
        all(p["full"] < med[x]["full"] for x in ("perf record", "bpftrace"))
    print("target (process + interrupts <= 0.3 %% of the machine and below both peers', RSS"
          " < 64 MiB): %s" % ("met" if ok else "NOT met"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
