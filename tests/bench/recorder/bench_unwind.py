#!/usr/bin/env python3
"""User stacks walked with unwind tables against the frame-pointer walk, and against the peers,
at the same time on the same workload.

Running at once, each in a cgroup v2 group of its own (process CPU to the microsecond):
  - pfr-recorder --unwind auto at 100 Hz (tables where a file has them, frame pointers elsewhere)
  - pfr-recorder --unwind fp at 97 Hz (the frame-pointer walk only)
  - bpftrace 'profile:hz:99 { @[kstack, ustack, comm] = count(); }'
  - perf record -a -g at 98 Hz (frame pointers)
  - perf record -a --call-graph dwarf at 96 Hz (8 KiB of user stack copied per sample, unwound
    only by perf report; left out with --no-perf-dwarf). On 2 CPUs it takes 0.05-0.1 s/min of
    process CPU and writes ~2.3 MB/s to the bench's temporary directory (deleted after each
    workload); the rest of its cost is in its sampling interrupts and in perf report later.
Each samples at a rate of its own, so on the spinner workload the time the spinners lose in each
one's sampling interrupts can be told apart (spinner_gaps.py, as bench_sample_cost.py; the
spinner must fold 96 Hz too, as bench_spinner.c does since this bench).

Two workloads, one after the other, with a fresh start of every profiler for each, and
--idlers mostly idle processes (roll-called at each start, as the other benches) throughout:
  spinner  one bench_spinner per CPU (stacks 20-40 deep, built with frame pointers): both walks
           see the same stacks, so the per-sample BPF figures compare like for like;
  nofp     code built without frame pointers: Debian's python3 running a CPU loop 24-40 Python
           frames deep (every 4th call through a builtin, so the interpreter recurses in C too),
           and `xz -9` compressing generated data, a new xz every few seconds.

Per window and profiler: BPF run time per sample of its perf_event programs (run_time_ns /
run_cnt from /proc/PID/fdinfo, kernel.bpf_stats_enabled=1), BPF run time of all its programs per
minute, process CPU per minute, and on the spinner workload the time lost in its sampling
interrupts (in windows where at least half its samples were seen at its phase). Per run: peak RSS (VmHWM) and the kernel memory of its BPF maps (memlock). Medians
over the windows, and per-window ratios: auto / fp (BPF per sample) and auto / bpftrace
(process + BPF per minute), with the number of windows each target held in. At the end, the
unwind metrics of both recorders from their /metrics endpoints.

Targets (the unwinding issue): BPF time per sample with tables at most 1.5x the frame-pointer
walk's (spinner workload, where both walk the same stacks); the recorder's steady-state CPU
(process + BPF, spinner workload) within 1.2x bpftrace's.

Usage (as root): bench_unwind.py --recorder BIN --spinner BIN --idler BIN
                     [--workloads spinner,nofp] [--windows 5] [--seconds 20] [--warmup 35]
                     [--idlers 300] [--no-perf-dwarf] [--metrics-port 19480]
"""
import argparse
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import spinner_gaps
from bench_recorder import NCPU, Tool, host_unready, recorder_tool, tool_cpu_s, vm_hwm_kib
from bench_sample_cost import FIND_S, Running, snapshot
from bpfstats import host_workload, loadavg, map_memlock, prog_stats

PERF_EVENT = 7  # BPF_PROG_TYPE_PERF_EVENT: one run per sample
BT = "profile:hz:99 { @[kstack, ustack, comm] = count(); }"
TARGET_SAMPLE = 1.5  # auto / fp, BPF ns per sample
TARGET_CPU = 1.2  # auto / bpftrace, process + BPF per minute
DEBIAN_PY = "/usr/bin/python3"  # Debian's, built without frame pointers (not a pyenv shim)

# A CPU loop in Python, 24-40 Python frames deep; every 4th call goes through builtins (sum,
# map), so _PyEval_EvalFrameDefault recurses in C as well and the native stack is deep too.
PY_LOOP = r'''
def leaf(n):
    s = 0
    for i in range(n):
        s += (i * i) % 7
    return s

def mid(depth, n):
    if depth == 0:
        return leaf(n)
    if depth % 4 == 0:
        return sum(map(lambda d: mid(d, n), (depth - 1,)))
    return mid(depth - 1, n)

while True:
    for d in (24, 32, 40):
        mid(d, 3000)
'''

UNWIND_METRICS = [
    ("stacks walked, dwarf", 'pfr_cpu_stacks_walked_total{method="dwarf"}'),
    ("stacks walked, fp", 'pfr_cpu_stacks_walked_total{method="fp"}'),
    ("frames found by tables", "pfr_unwind_frames_total"),
    ("stacks walked to their end (table)", "pfr_unwind_stacks_complete_total"),
    ("fallback: table pending", 'pfr_unwind_fallbacks_total{reason="table_pending"}'),
    ("fallback: no row", 'pfr_unwind_fallbacks_total{reason="no_row"}'),
    ("fallback: mappings busy", 'pfr_unwind_fallbacks_total{reason="mappings_busy"}'),
    ("fallback: mapping not cached", 'pfr_unwind_fallbacks_total{reason="mapping_not_cached"}'),
    ("cut: bad memory", 'pfr_unwind_walks_cut_total{reason="bad_memory"}'),
    ("cut: unmapped pc", 'pfr_unwind_walks_cut_total{reason="unmapped_pc"}'),
    ("cut: max depth", 'pfr_unwind_walks_cut_total{reason="max_depth"}'),
    ("table requests lost", "pfr_unwind_requests_lost_total"),
    ("files: table built (rebuilds too)", 'pfr_unwind_files_total{outcome="table"}'),
    ("files: no table", 'pfr_unwind_files_total{outcome="no_table"}'),
    ("files: no room", 'pfr_unwind_files_total{outcome="no_room"}'),
    ("files: bad / open failed", ('pfr_unwind_files_total{outcome="bad_file"}',
                                  'pfr_unwind_files_total{outcome="open_failed"}')),
    ("table files loaded", "pfr_unwind_table_files"),
    ("table bytes", "pfr_unwind_table_bytes"),
    ("table bytes max", "pfr_unwind_table_bytes_max"),
    ("table evictions", "pfr_unwind_table_evictions_total"),
    ("table build s (total / max)", ("pfr_unwind_table_build_seconds_total",
                                     "pfr_unwind_table_build_max_seconds")),
    ("samples", "pfr_cpu_samples_total"),
    ("samples lost (all reasons)", "pfr_cpu_samples_lost_total{*"),
]


def metrics(port):
    """The recorder's /metrics as {series: value}, or {} if unreadable."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            try:
                out[k] = float(v)
            except ValueError:
                pass
    return out


def make_tools(args, tmp):
    """The profilers of this bench; their names are the keys of the figures."""
    def pfr(name, mode, hz, port):
        t = recorder_tool(name, args.recorder, os.path.join(tmp, name.replace(" ", "-") + ".db"),
                          hz)
        t.argv += ["--unwind", mode, "--metrics-listen", "127.0.0.1:%d" % port]
        t.port, t.bpf = port, True
        return t

    perf_out = os.path.join(tmp, "perf.data")
    bpftrace = Tool("bpftrace", ["bpftrace", "-e", BT], "Attaching", signal.SIGINT, 99)
    bpftrace.bpf = True
    tools = [
        pfr("pfr auto", "auto", 100, args.metrics_port),
        pfr("pfr fp", "fp", 97, args.metrics_port + 1),
        bpftrace,
        Tool("perf fp", ["perf", "record", "-F", "98", "-a", "-g", "-q", "-o", perf_out],
             None, signal.SIGINT, 98),
    ]
    if not args.no_perf_dwarf:
        tools.append(Tool("perf dwarf", ["perf", "record", "-F", "96", "-a", "--call-graph",
                                         "dwarf", "-q", "-o", perf_out + ".dwarf"],
                          None, signal.SIGINT, 96))
    return tools


class Load:
    """The workload's own processes (the idle ones run for the whole bench)."""

    def __init__(self, kind, args, tmp):
        self.kind, self.procs, self.files = kind, [], []
        if kind == "spinner":
            self.files = [os.path.join(tmp, "spin%d" % i) for i in range(NCPU)]
            for i, f in enumerate(self.files):
                self.procs.append(subprocess.Popen([args.spinner, f, str(i)]))
        else:
            script = os.path.join(tmp, "pyloop.py")
            with open(script, "w") as f:
                f.write(PY_LOOP)
            data = os.path.join(tmp, "xzdata")
            write_xz_data(data, args.xz_mib << 20)
            self.procs.append(subprocess.Popen([DEBIAN_PY, script]))
            self.procs.append(subprocess.Popen(
                ["sh", "-c", 'while :; do xz -9 -T1 -c "$1" >/dev/null; done', "sh", data],
                start_new_session=True))
        self.pids = [p.pid for p in self.procs]
        time.sleep(1)

    def stop(self):
        for p in self.procs:
            if p.args[0] == "sh":
                os.killpg(p.pid, signal.SIGKILL)  # the loop and its xz (a session of their own)
            else:
                p.kill()
        for p in self.procs:
            p.wait()


def write_xz_data(path, size):
    """Text that compresses about 6:1 (words, numbers, hex), the same at every run."""
    r = random.Random(1)
    words = ["%s%d" % (w, r.randrange(1000)) for w in
             "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi"
             " rho sigma tau upsilon phi chi psi omega".split()]
    out, n = [], 0
    while n < size:
        line = " ".join(r.choice(words) for _ in range(12)) + " %08x\n" % r.getrandbits(32)
        out.append(line)
        n += len(line)
    with open(path, "w") as f:
        f.write("".join(out))


def bpf_window(a, b):
    """From two prog_stats: (ns of all programs, ns and runs of the perf_event programs); None
    when a program is missing from either (not loaded yet, or gone)."""
    if not a or set(a) != set(b):
        return None
    ns = sum(b[k][1] - v[1] for k, v in a.items() if k in b)
    pe = [(b[k][1] - v[1], b[k][2] - v[2]) for k, v in a.items() if k in b and v[0] == PERF_EVENT]
    return ns, sum(x[0] for x in pe), sum(x[1] for x in pe)


def irq_window(run, s0, s1, dt):
    """µs lost per sample in run's sampling interrupts between two spinner snapshots dt s apart;
    None when fewer than half its samples were seen at its phase (the phase moved, or other
    interrupts buried it: on a busy host the figure is then noise)."""
    n = ns = 0.0
    for (counts, gap_ns), b in zip(spinner_gaps.fold(s0, s1, run.period), run.bins):
        en, es = spinner_gaps.excess_at(counts, gap_ns, b)
        n, ns = n + en, ns + es
    if n < 0.5 * run.tool.hz * dt * len(run.bins):
        return None
    return ns / n / 1e3


def run_workload(kind, args, tmp, work):
    """Every profiler at once on one workload: per profiler, its windows and end figures."""
    load = Load(kind, args, tmp)
    runs, res = [], {}
    try:
        for t in make_tools(args, tmp):
            runs.append(Running(t, tmp))
            res[t.name] = {"w": [], "hz": t.hz, "bpf": getattr(t, "bpf", False)}
        irq = kind == "spinner"
        if irq:
            # phases once all run: a new perf event on a CPU restarts the timers already there
            time.sleep(2)
            s0 = snapshot(load)
            time.sleep(FIND_S)
            s1 = snapshot(load)
            for r in runs:
                if r.period not in s0[0][1]:
                    print("%-10s %d Hz: not folded by this bench_spinner (rebuild it): no"
                          " interrupt figure for it" % (r.tool.name, r.tool.hz))
                    r.bins = None
                    continue
                share = r.find_phase(s0, s1)
                print("%-10s %d Hz, phase found at bins %s (%.0f %% of its samples seen there)"
                      % (r.tool.name, r.tool.hz, r.bins, 100 * share), flush=True)
                if share < 0.5:
                    print("  (its interrupts were not found: no interrupt figure for it)")
                    r.bins = None
        for r in runs:
            # bpftrace prints "Attaching" before it loads its program: the windows start after
            # every profiler holds its programs
            end = time.time() + 60
            while getattr(r.tool, "bpf", False) and not prog_stats(r.proc.pid):
                if time.time() > end:
                    raise RuntimeError("%s: no BPF program after 60 s" % r.tool.name)
                time.sleep(0.2)
        work.roll_call()  # the idle processes are met in the warm-up, not in the windows
        time.sleep(args.warmup)
        for w in range(args.windows):
            s0 = snapshot(load) if irq else None
            t0 = time.time()
            c0 = [tool_cpu_s(r.group, r.proc) for r in runs]
            b0 = [prog_stats(r.proc.pid) for r in runs]
            time.sleep(args.seconds)
            s1 = snapshot(load) if irq else None
            t1 = time.time()
            c1 = [tool_cpu_s(r.group, r.proc) for r in runs]
            b1 = [prog_stats(r.proc.pid) for r in runs]
            dt, line = t1 - t0, []
            for i, r in enumerate(runs):
                m = {"proc": (c1[i] - c0[i]) / dt * 60, "bpf": 0.0, "ns": None, "total": None}
                if getattr(r.tool, "bpf", False):
                    got = bpf_window(b0[i], b1[i])
                    if got:  # else no BPF figure in this window: it is left out
                        bpf, pe_ns, pe_runs = got
                        m["bpf"] = bpf / 1e9 / dt * 60
                        m["ns"] = pe_ns / pe_runs if pe_runs else None
                    else:
                        m["bpf"] = None
                if m["bpf"] is not None:
                    m["total"] = m["proc"] + m["bpf"]
                us = irq_window(r, s0, s1, dt) if irq and r.bins else None
                if us is not None:
                    m["irq_us"] = us
                    m["irq"] = us * r.tool.hz * NCPU * 60 / 1e6
                    m["full"] = m["proc"] + m["irq"]
                res[r.tool.name]["w"].append(m)
                line.append("%s %s ns %.3f+%s s/min%s" % (
                    r.tool.name, "%.0f" % m["ns"] if m["ns"] else "-", m["proc"], fmt(m["bpf"]),
                    " irq %.1f us" % m["irq_us"] if "irq_us" in m else ""))
            print("%s window %d (load %.1f): %s" % (kind, w + 1, loadavg(), " | ".join(line)),
                  flush=True)
        for r in runs:
            res[r.tool.name]["rss"] = vm_hwm_kib(r.proc.pid) / 1024
            res[r.tool.name]["maps"] = map_memlock(r.proc.pid) / 2**20
            if hasattr(r.tool, "port"):
                res[r.tool.name]["metrics"] = metrics(r.tool.port)
    finally:
        for r in runs:
            r.stop()
        load.stop()
        for f in os.listdir(tmp):  # rings and perf data of this workload
            if f.endswith((".db", ".db-wal", ".db-shm")) or f.startswith("perf.data"):
                os.remove(os.path.join(tmp, f))
    return res


def med(ws, key):
    vals = [m[key] for m in ws if m.get(key) is not None]
    return statistics.median(vals) if vals else None


def mean(ws, key):
    vals = [m[key] for m in ws if m.get(key) is not None]
    return statistics.fmean(vals) if vals else None


def fmt(v, f="%.3f"):
    return f % v if v is not None else "—"


def ratios(a, b, key, limit):
    """Per-window ratios a/b of key: (median, min, max, windows at or under limit, windows),
    and the ratio over all windows together."""
    pairs = [(x[key], y[key]) for x, y in zip(a, b) if x.get(key) is not None and y.get(key)]
    if not pairs:
        return None
    rs = [x / y for x, y in pairs]
    together = sum(x for x, _ in pairs) / sum(y for _, y in pairs)
    return (statistics.median(rs), min(rs), max(rs), sum(r <= limit for r in rs), len(rs),
            together)


def report(kind, res, args):
    names = list(res)
    irq = kind == "spinner"
    print()
    print("Workload %s: %s + %d idle processes, %d CPUs, %d windows x %.0f s at the same time,"
          " medians" % (kind, "%d bench_spinner (frame pointers)" % NCPU if kind == "spinner"
                        else "python3 loop + xz -9 loop (no frame pointers)", args.idlers, NCPU,
                        args.windows, args.seconds))
    head = ("| profiler | Hz | BPF ns/sample (range) | BPF s/min | process s/min (mean) |"
            " process + BPF s/min (mean) |")
    if irq:
        head += " interrupts us/sample | process + interrupts s/min |"
    head += " peak RSS MiB | BPF maps MiB |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for n in names:
        ws = res[n]["w"]
        nss = [m["ns"] for m in ws if m["ns"]]
        ns = ("%.0f (%.0f–%.0f)" % (statistics.median(nss), min(nss), max(nss))
              if nss else "—")
        row = "| %s | %d | %s | %s | %.3f (%.3f) | %s (%s) |" % (
            n, res[n]["hz"], ns, fmt(med(ws, "bpf")) if res[n]["bpf"] else "—",
            med(ws, "proc"), mean(ws, "proc"), fmt(med(ws, "total")), fmt(mean(ws, "total")))
        if irq:
            row += " %s | %s |" % (fmt(med(ws, "irq_us"), "%.1f"), fmt(med(ws, "full")))
        row += " %.1f | %.1f |" % (res[n]["rss"], res[n]["maps"])
        print(row)
    print("(BPF ns/sample: run time of its perf_event programs per run; BPF s/min: all its"
          " programs (exec/exit tracepoints too); process: its cgroup's CPU; interrupts: the time"
          " the spinners lost at its sampling phase, BPF included (perf's stack walks show only"
          " there); BPF maps: kernel memory of its maps, outside RSS)")
    auto, fp, bt = res["pfr auto"]["w"], res["pfr fp"]["w"], res["bpftrace"]["w"]
    out = {}
    for label, a, b, key, limit in (
            ("auto / fp, BPF ns per sample", auto, fp, "ns", TARGET_SAMPLE),
            ("auto / bpftrace, process + BPF per minute", auto, bt, "total", TARGET_CPU),
            ("auto / fp, process + BPF per minute", auto, fp, "total", TARGET_CPU),
            ("fp / bpftrace, process + BPF per minute", fp, bt, "total", TARGET_CPU),
            ("auto / bpftrace, BPF ns per sample", auto, bt, "ns", TARGET_SAMPLE)):
        r = ratios(a, b, key, limit)
        out[label] = r
        if r:
            print("%s: %.2fx (windows %.2f–%.2f; <= %.1fx in %d of %d), %.2fx over all windows"
                  % (label, r[0], r[1], r[2], limit, r[3], r[4], r[5]))
    if irq:
        print("(interrupts: medians of the windows where at least half of the profiler's samples"
              " were seen at its phase: %s)" % ", ".join(
                  "%s %d of %d" % (n, sum("irq_us" in m for m in res[n]["w"]), len(res[n]["w"]))
                  for n in names))
    if irq and "perf fp" in res:
        r = ratios(auto, res["perf fp"]["w"], "full", 1.0)
        if r:
            print("auto / perf fp, process + interrupts per minute: %.2fx (windows %.2f–%.2f;"
                  " lower in %d of %d)" % (r[0], r[1], r[2], r[3], r[4]))
    return out


def print_metrics(per_workload):
    cols = [(k, n) for k, res in per_workload.items() for n in res if "metrics" in res[n]]
    if not cols:
        return
    print()
    print("pfr's unwind metrics at the end of each workload (/metrics)")
    print("| metric | " + " | ".join("%s, %s" % (n, k) for k, n in cols) + " |")
    print("|---|" + "---|" * len(cols))
    for label, series in UNWIND_METRICS:
        keys = series if isinstance(series, tuple) else (series,)
        cells = []
        for k, n in cols:
            m = per_workload[k][n]["metrics"]
            vals = [sum(v for x, v in m.items() if x.startswith(s[:-1])) if s.endswith("*")
                    else m.get(s) for s in keys]
            if all(v is None for v in vals):
                cells.append("—")
            elif label.startswith("table build"):
                cells.append(" / ".join(fmt(v, "%.3f") for v in vals))
            elif label.startswith("files: bad"):
                cells.append(" / ".join(fmt(v, "%.0f") for v in vals))
            else:
                cells.append("%.0f" % sum(v or 0 for v in vals))
        print("| %s | %s |" % (label, " | ".join(cells)))
    for k, n in cols:
        m = per_workload[k][n]["metrics"]
        d, f = (m.get('pfr_cpu_stacks_walked_total{method="%s"}' % x, 0) for x in ("dwarf", "fp"))
        if d + f:
            print("%s, %s: %.1f %% of user stacks walked with a table, %.1f table frames per such"
                  " stack" % (n, k, 100 * d / (d + f),
                              m.get("pfr_unwind_frames_total", 0) / d if d else 0))


def verdicts(outs):
    print()
    for kind, out in outs.items():
        decisive = kind == "spinner"
        for label, limit, what in (
                ("auto / fp, BPF ns per sample", TARGET_SAMPLE,
                 "BPF time per sample, tables / frame pointers"),
                ("auto / bpftrace, process + BPF per minute", TARGET_CPU,
                 "recorder CPU (process + BPF), auto / bpftrace")):
            r = out.get(label)
            if not r:
                print("%s <= %.1fx on %s: no figure" % (what, limit, kind))
                continue
            verdict = "met" if r[0] <= limit else "NOT met"
            print("%s <= %.1fx on %s%s: %.2fx (<= %.1fx in %d of %d windows): %s"
                  % (what, limit, kind, " (the target's workload)" if decisive
                     else " (information: not like for like)", r[0], limit, r[3], r[4],
                     "target " + verdict if decisive else verdict))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--recorder", required=True)
    ap.add_argument("--spinner", required=True)
    ap.add_argument("--idler", required=True)
    ap.add_argument("--workloads", default="spinner,nofp",
                    help="comma-separated, in order: spinner, nofp (default both)")
    ap.add_argument("--windows", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=20)
    # the roll call takes ~15 s of both CPUs; tables are built when a file is first met
    ap.add_argument("--warmup", type=float, default=35)
    ap.add_argument("--idlers", type=int, default=300)
    ap.add_argument("--xz-mib", type=int, default=4, help="size of the data xz compresses")
    ap.add_argument("--no-perf-dwarf", action="store_true",
                    help="leave out perf record --call-graph dwarf (96 Hz)")
    ap.add_argument("--metrics-port", type=int, default=19480,
                    help="pfr auto's /metrics port; pfr fp's is the next one")
    args = ap.parse_args()
    args.churn_rate, args.churn = 0, None
    kinds = [k for k in args.workloads.split(",") if k]
    if any(k not in ("spinner", "nofp") for k in kinds):
        ap.error("--workloads: spinner, nofp")
    why = host_unready(ap, args)
    if not why and "nofp" in kinds and not (os.access(DEBIAN_PY, os.X_OK) and shutil.which("xz")):
        why = DEBIAN_PY + " or xz missing"
    if why:
        print("SKIP: " + why)
        return 77
    tmp = tempfile.mkdtemp(prefix="pfr-bench-unwind-")
    per_workload, outs = {}, {}
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    try:
        with host_workload(args.idler, args.spinner, args.idlers, tmp, spin=False) as work:
            for kind in kinds:
                per_workload[kind] = run_workload(kind, args, tmp, work)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print("bench_unwind.py, %s to %s, %s" % (started, time.strftime("%H:%M:%S UTC", time.gmtime()),
                                             args.recorder))
    for kind in kinds:
        outs[kind] = report(kind, per_workload[kind], args)
    print_metrics(per_workload)
    verdicts(outs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
