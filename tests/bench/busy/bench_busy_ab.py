#!/usr/bin/env python3
"""Two or more pfr-recorders at once on the busy host's load (bench_busy_host.py's build at -j2
and headless Chromium), so that a change to the sampler is measured
against the tree before it in the same windows: the host's load of the moment (other jobs, the
build's phase, new processes) weighs on both alike.

Per window of --seconds after --warmup, for each recorder: the runs a second, µs a run and s/min
of its BPF programs (run_time_ns and run_cnt from its descriptors, kernel.bpf_stats_enabled on)
and its threads' CPU; at the end its unwinder's metrics, then the medians and, for each recorder
after the first, the median of its windows' ratios of pfr_sample_uw's µs a run to the first's.
Each recorder has its own ring and unwind cache (beside its ring) and an empty config file.

With --steady SPINNER IDLER the load is the steady-state bench's instead (bench_recorder.py: a
spinner per CPU and --idlers mostly idle processes, roll-called once the recorders run): its
process side, measured in turn, swings with the host more than the recorders differ, and side by
side both meet the same host.

The exit tracepoint's programs of the recorders run one after the other on the same exit, the
later ones on caches the first warmed: list the recorders in the other order in a second run
to see that effect (the sampling programs fire on timers of their own).

Usage (as root): bench_busy_ab.py [--windows 4] [--seconds 60] [--warmup 40] [--source TREE]
                     [--steady SPINNER IDLER [--idlers 300]] BASE=BIN OTHER=BIN [...]
"""
import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "recorder"), os.path.join(HERE, "..", "..", "recorder")]
import recorder_itest as ri  # noqa: E402
from bench_busy_host import Load, pfr_metrics, prog_figures, thread_cpu_s  # noqa: E402
from bpfstats import bpf_stats, host_workload, loadavg, prog_stats  # noqa: E402

def start_recorder(label, path, tmp):
    d = os.path.join(tmp, label)
    os.mkdir(d)
    port = ri.free_port()
    env = dict(os.environ, PFR_CONFIG=ri.empty_config(d))
    with open(os.path.join(d, "log"), "w") as log:
        p = subprocess.Popen([path, "--store", os.path.join(d, "ring.db"), "--metrics-listen",
                              "127.0.0.1:%d" % port], stdout=log, stderr=subprocess.STDOUT,
                             env=env)
    return {"label": label, "proc": p, "port": port, "rows": [],
            "comm": os.path.basename(path)[:15]}


def window(recs, seconds):
    b0 = [prog_stats(r["proc"].pid) for r in recs]
    t0 = [thread_cpu_s(r["proc"].pid) for r in recs]
    s0 = time.time()
    time.sleep(seconds)
    dt = time.time() - s0
    b1 = [prog_stats(r["proc"].pid) for r in recs]
    t1 = [thread_cpu_s(r["proc"].pid) for r in recs]
    for i, r in enumerate(recs):
        progs = {name: (rate, ns / 1e3, spm) for name, rate, ns, spm in
                 prog_figures(b0[i], b1[i], dt)}
        proc = sum(t1[i].get(k, 0) - v for k, v in t0[i].items()) / dt * 60
        threads = {thread_label(r, k): (t1[i].get(k, 0) - v) / dt * 60 for k, v in t0[i].items()}
        r["rows"].append({"progs": progs, "bpf": sum(v[2] for v in progs.values()),
                          "proc": proc, "threads": threads})


def thread_label(rec, name):
    """The main thread is named after the binary (each recorder's differs): "main" for all."""
    return "main" if name == rec["comm"] else name


def us(row, prog):
    return row["progs"].get(prog, (0, 0, 0))[1]


def report(recs):
    print()
    for r in recs:
        rows = r["rows"]
        print("%s: pfr_sample_uw µs a run, median %.2f (windows %s); pfr_exit %.2f; BPF %.3f s/min;"
              " process %.3f s/min"
              % (r["label"], statistics.median(us(x, "pfr_sample_uw") for x in rows),
                 " ".join("%.2f" % us(x, "pfr_sample_uw") for x in rows),
                 statistics.median(us(x, "pfr_exit") for x in rows),
                 statistics.median(x["bpf"] for x in rows),
                 statistics.median(x["proc"] for x in rows)))
    # the threads that take most, each recorder's median s/min of each (the process's share of a
    # change shows in the thread that does the work, apart from the others' noise)
    names = sorted({k for r in recs for x in r["rows"] for k in x["threads"]},
                   key=lambda k: -statistics.median(x["threads"].get(k, 0) for x in recs[0]["rows"]))
    for r in recs:
        print("%s threads, s/min: %s" % (r["label"], " ".join(
            "%s %.3f" % (k, statistics.median(x["threads"].get(k, 0) for x in r["rows"]))
            for k in names[:6])))
    base = recs[0]
    for r in recs[1:]:
        ratio(r, base, "process s/min", lambda x: x["proc"])
        ratio(r, base, "pfr_sample_uw µs a run", lambda x: us(x, "pfr_sample_uw"))


def ratio(rec, base, what, value):
    """The median of rec's windows' ratios to base's of value(window), where base's is not 0."""
    rat = [value(x) / value(y) for x, y in zip(rec["rows"], base["rows"]) if value(y)]
    if rat:
        print("%s / %s, %s: median ratio %.3f (windows %s)"
              % (rec["label"], base["label"], what, statistics.median(rat),
                 " ".join("%.3f" % x for x in rat)))


def stop_recorders(recs):
    """SIGTERM, then SIGKILL after 30 s; each once (a second call finds them gone)."""
    for r in recs:
        if r["proc"].poll() is None:
            r["proc"].send_signal(signal.SIGTERM)
    for r in recs:
        try:
            r["proc"].wait(30)
        except subprocess.TimeoutExpired:
            r["proc"].kill()
            r["proc"].wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", default=os.path.join(HERE, "..", "..", ".."))
    ap.add_argument("--windows", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=40)
    ap.add_argument("--steady", nargs=2, metavar=("SPINNER", "IDLER"),
                    help="the steady-state bench's load instead of the build and Chromium")
    ap.add_argument("--idlers", type=int, default=300, help="idle processes, with --steady")
    ap.add_argument("recorder", nargs="+", help="LABEL=BIN, the first the base")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: needs root")
        return 77
    tmp = tempfile.mkdtemp(prefix="pfr-bench-busy-ab-")
    load = None if args.steady else Load(args, tmp)
    recs = []
    try:
        with contextlib.ExitStack() as stack:
            if args.steady:
                work = stack.enter_context(host_workload(args.steady[1], args.steady[0],
                                                         args.idlers, tmp))
            else:
                stack.enter_context(bpf_stats())
                load.start()
            for spec in args.recorder:
                label, path = spec.split("=", 1)
                recs.append(start_recorder(label, path, tmp))
            if args.steady:
                work.roll_call()
            time.sleep(args.warmup)
            for w in range(args.windows):
                la = loadavg()
                window(recs, args.seconds)
                print("window %d (load %.0f): %s" % (w + 1, la, " | ".join(
                    "%s: sample_uw %.0f/s %.2f µs, exit %.0f/s %.2f µs, BPF %.3f, process %.3f"
                    % (r["label"], r["rows"][-1]["progs"].get("pfr_sample_uw", (0,))[0],
                       us(r["rows"][-1], "pfr_sample_uw"),
                       r["rows"][-1]["progs"].get("pfr_exit", (0,))[0],
                       us(r["rows"][-1], "pfr_exit"), r["rows"][-1]["bpf"],
                       r["rows"][-1]["proc"]) for r in recs)), flush=True)
            for r in recs:
                print(r["label"], " ".join(ln for ln in pfr_metrics(r["port"])
                                           if "unwind" in ln or "walked" in ln or "tables_dropped" in ln
                                           or "resident_peak" in ln))
            stop_recorders(recs)
    finally:
        stop_recorders(recs)
        if load:
            load.stop()
            load.close()
        subprocess.run(["rm", "-rf", tmp])
    report(recs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
