#!/usr/bin/env python3
"""Per-sample BPF run time of CPU sampler versions side by side, with bpftrace's in the same run.

Each round runs, one after the other on the same workload (2 spinners with stacks 20-40 deep
keeping the CPUs busy plus mostly idle processes, as bench_recorder.py), every --object through
bench_bpf_sample (load, attach at --hz on every CPU, drain every 10 s like the recorder) and then
`bpftrace -e 'profile:hz:99 { @[kstack, ustack, comm] = count(); }'`, and reads run_time_ns and
run_cnt of the perf_event programs over --seconds after --warmup (kernel.bpf_stats_enabled=1).
Prints each round and the medians: ns per sample and BPF seconds per minute.

To compare against an earlier sampler, build its object from git without touching the tree:
    mkdir -p /tmp/old && git show REV:bpf/cpu_profile.bpf.c > /tmp/old/cpu_profile.bpf.c &&
    git show REV:bpf/cpu_profile.h > /tmp/old/cpu_profile.h &&
    clang -target bpf -O2 -g -D__TARGET_ARCH_x86 -I BUILD/bpf -I /tmp/old \\
        -c /tmp/old/cpu_profile.bpf.c -o /tmp/old/old.bpf.o

Usage: bench_bpf_sample.py --bench BUILD/tests/bench/recorder/bench_bpf_sample \\
           --spinner BIN --idler BIN --object old=/tmp/old/old.bpf.o \\
           --object new=BUILD/bpf/cpu_profile.bpf.o [--rounds 5] [--seconds 20] [--warmup 5]
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from bpfstats import host_workload, loadavg, prog_ids_of

NCPU = os.cpu_count()
BT = "profile:hz:99 { @[kstack, ustack, comm] = count(); }"


def progs():
    out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True)
    return {p["id"]: p for p in json.loads(out.stdout or "[]")}


def start_object(args, path):
    return subprocess.Popen([args.bench, path, str(args.seconds), str(args.warmup), str(args.hz),
                             "10"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish_object(p, path):
    out, err = p.communicate()
    if p.returncode != 0:
        raise RuntimeError("%s: %s" % (path, err[-2000:]))
    d = json.loads(out.strip().splitlines()[-1])
    return {"ns": d["ns_per_run"], "runs": d["runs"], "s_per_min": d["bpf_s_per_min"],
            "misses": d["misses"]}


def run_object(args, path):
    return finish_object(start_object(args, path), path)


def run_bpftrace(args, tmp):
    before = set(progs())
    log = os.path.join(tmp, "bt.log")
    with open(log, "w") as lf:
        p = subprocess.Popen(["bpftrace", "-e", BT], stdout=lf, stderr=subprocess.STDOUT)
    try:
        end = time.time() + 60
        while "Attaching" not in open(log, errors="replace").read():
            if time.time() > end or p.poll() is not None:
                raise RuntimeError("bpftrace did not start: " + open(log).read()[-2000:])
            time.sleep(0.1)
        time.sleep(args.warmup)
        now = progs()
        mine = prog_ids_of(p.pid)  # other programs may load meanwhile (other benchmarks)
        ids = [i for i in now if i not in before and now[i].get("type") == "perf_event"
               and i in mine]
        t0 = time.time()
        a = {i: (now[i].get("run_time_ns", 0), now[i].get("run_cnt", 0)) for i in ids}
        time.sleep(args.seconds)
        now = progs()
        t1 = time.time()
        ns = sum(now[i].get("run_time_ns", 0) - a[i][0] for i in ids if i in now)
        runs = sum(now[i].get("run_cnt", 0) - a[i][1] for i in ids if i in now)
    finally:
        p.kill()  # no map print at exit: its symbolization is not what is measured
        p.wait()
    return {"ns": ns / runs if runs else 0, "runs": runs, "s_per_min": ns / 1e9 / (t1 - t0) * 60,
            "misses": 0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--spinner", required=True)
    ap.add_argument("--idler", required=True)
    ap.add_argument("--object", action="append", default=[], help="LABEL=PATH, repeatable")
    ap.add_argument("--no-bpftrace", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--warmup", type=float, default=5)
    ap.add_argument("--hz", type=int, default=100)
    ap.add_argument("--idlers", type=int, default=100)
    ap.add_argument("--concurrent", action="store_true",
                    help="run all objects and bpftrace at the same time, each on its own perf "
                         "events (same load, same window: paired figures)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: needs root")
        return 77
    if not shutil.which("bpftool") or (not args.no_bpftrace and not shutil.which("bpftrace")):
        print("SKIP: bpftool or bpftrace missing")
        return 77
    objs = [o.split("=", 1) for o in args.object]
    names = [o[0] for o in objs] + ([] if args.no_bpftrace else ["bpftrace"])
    tmp = tempfile.mkdtemp(prefix="pfr-bench-bpf-")
    res = {n: [] for n in names}
    loads = []

    def record(r, name, m, la):
        m["load"] = la
        loads.append(la)
        res[name].append(m)
        print("round %d %-10s %8.0f ns/sample  %.4f s/min  %d samples  load %.2f"
              % (r + 1, name, m["ns"], m["s_per_min"], m["runs"], la), flush=True)

    try:
        with host_workload(args.idler, args.spinner, args.idlers, tmp):
            for r in range(args.rounds):
                if args.concurrent:
                    la = loadavg()
                    started = [(n, start_object(args, p)) for n, p in objs]
                    ms = {}
                    if not args.no_bpftrace:
                        ms["bpftrace"] = run_bpftrace(args, tmp)
                    for (n, p), (_, path) in zip(started, objs):
                        ms[n] = finish_object(p, path)
                    for name in names:
                        record(r, name, ms[name], la)
                    continue
                for name in names:
                    la = loadavg()
                    if name == "bpftrace":
                        m = run_bpftrace(args, tmp)
                    else:
                        m = run_object(args, dict(objs)[name])
                    record(r, name, m, la)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print("medians of %d rounds, %d CPUs, %d spinners + %d idlers, load %.2f-%.2f:"
          % (args.rounds, NCPU, NCPU, args.idlers, min(loads), max(loads)))
    for name in names:
        ms = res[name]
        print("%-10s %8.0f ns/sample (%.0f-%.0f)  %.4f s/min" % (
            name, statistics.median(m["ns"] for m in ms), min(m["ns"] for m in ms),
            max(m["ns"] for m in ms), statistics.median(m["s_per_min"] for m in ms)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
