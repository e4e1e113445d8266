#!/usr/bin/env python3
"""JIT code named from perf maps, side by side with perf: a Node program
(tests/recorder/workloads/jit_calltree.js, run with --perf-basic-prof
--interpreted-frames-native-stack) is profiled at the same time by each recorder given and by
`perf record -F 99 -g -p PID` (perf reads the same /tmp/perf-PID.map when it reports). For each:
the node samples, the share whose leaf frame is unnamed, the share under pfrJitWork, and
pfrJitHeavy's share of pfrJitHeavy + pfrJitLight (3:1 in CPU time); for the recorders also
their CPU time per minute from the node start to the drain after its exit (from a cgroup of its
own, as the other recorder benches; else its threads' /proc/PID/task/*/schedstat), so the cost
of reading the map shows against a recorder that does not (--perf-maps false).

Usage: bench_jit.py --dump BUILD/tests/recorder/recorder_store_dump [--seconds 30] [--rounds 3]
                    LABEL=RECORDER[,EXTRA-FLAG...] [LABEL=RECORDER[,...] ...]
e.g.   bench_jit.py --dump build-rel/tests/recorder/recorder_store_dump \\
           maps=build-rel/recorder/pfr-recorder nomaps=build-rel/recorder/pfr-recorder,--perf-maps,false
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time

from bpfstats import CpuGroup, threads

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "recorder", "workloads", "jit_calltree.js")


def cpu_s(group, pid):
    """The recorder's CPU seconds: from its cgroup (exited threads too), else the sum of its
    threads' (bpfstats.threads)."""
    used = group.usage_s()
    if used is not None:
        return used
    return sum(t[2] for t in threads(pid)) / 1e9


def shares(stacks):
    """stacks: list of (weight, [frame names, leaf first]); returns the figures of one tool."""
    total = sum(w for w, _ in stacks)
    unnamed = sum(w for w, fs in stacks if fs and ("[unknown]" in fs[0] or fs[0].startswith("0x")))
    work = sum(w for w, fs in stacks if any("pfrJitWork" in f for f in fs))
    heavy = sum(w for w, fs in stacks if any("pfrJitHeavy" in f for f in fs))
    light = sum(w for w, fs in stacks if any("pfrJitLight" in f for f in fs))
    return {"samples": total, "unnamed_leaf": unnamed / total if total else 0,
            "under_work": work / total if total else 0,
            "heavy_share": heavy / (heavy + light) if heavy + light else 0}


def pfr_stacks(dump, store, pid):
    out = subprocess.run([dump, store, "--samples"], capture_output=True, text=True, check=True)
    stacks = []
    for line in out.stdout.splitlines():
        for s in json.loads(line).get("samples", []):
            if s["pid"] == pid:
                stacks.append((s["value"], [f["function"] for f in s["frames"]]))
    return stacks


def perf_stacks(data):
    out = subprocess.run(["perf", "script", "-i", data, "-F", "ip,sym"], capture_output=True,
                         text=True, check=True)
    stacks, cur = [], []
    for line in out.stdout.splitlines() + [""]:
        if line.strip():
            parts = line.strip().split(None, 1)
            cur.append(parts[1] if len(parts) > 1 else "[unknown]")
        elif cur:
            stacks.append((1, cur))
            cur = []
    return stacks


def one_round(args, specs, node, tmp):
    recs = []
    for label, exe, extra in specs:
        store = os.path.join(tmp, label + ".db")
        log = open(os.path.join(tmp, label + ".log"), "w")
        group = CpuGroup("pfr-bench-jit-" + label)
        p = subprocess.Popen([exe, "--store", store, "--interval", "10", "--metrics-listen", "off",
                              "--scrape-local", "off", "--go-heap-profiler", "disabled"] + extra,
                             stderr=log, preexec_fn=group.join)
        recs.append((label, p, store, log, group))
    time.sleep(3)
    before = {label: cpu_s(group, p.pid) for label, p, _, _, group in recs}
    t0 = time.monotonic()
    w = subprocess.Popen([node, "--perf-basic-prof", "--interpreted-frames-native-stack", SCRIPT,
                          str(args.seconds)], cwd=tmp)  # where V8 may write its log
    data = os.path.join(tmp, "perf.data")
    perf = subprocess.Popen(["perf", "record", "-q", "-F", "99", "-g", "-p", str(w.pid), "-o",
                             data], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    w.wait()
    perf.wait()
    time.sleep(11)  # the drain after the exit
    res = {}
    minutes = (time.monotonic() - t0) / 60
    for label, p, store, log, group in recs:
        res[label] = {"cpu_ms_min": (cpu_s(group, p.pid) - before[label]) * 1e3 / minutes}
        p.terminate()
        p.wait()
        log.close()
        group.close()
        res[label].update(shares(pfr_stacks(args.dump, store, w.pid)))
    res["perf"] = shares(perf_stacks(data))
    perf_map = "/tmp/perf-%d.map" % w.pid
    res["map_bytes"] = os.path.getsize(perf_map) if os.path.exists(perf_map) else 0
    if os.path.exists(perf_map):
        os.unlink(perf_map)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("recorders", nargs="+")
    args = ap.parse_args()
    node = shutil.which("node") or shutil.which("nodejs")
    specs = []
    for r in args.recorders:
        label, rest = r.split("=", 1)
        parts = rest.split(",")
        specs.append((label, parts[0], parts[1:]))
    rounds = []
    for i in range(args.rounds):
        tmp = tempfile.mkdtemp(prefix="pfr-bench-jit-")
        try:
            r = one_round(args, specs, node, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        rounds.append(r)
        print("round %d (perf map %d bytes):" % (i + 1, r["map_bytes"]))
        for label in [s[0] for s in specs] + ["perf"]:
            x = r[label]
            print("  %-8s samples %5d  unnamed leaf %5.1f%%  under pfrJitWork %5.1f%%  "
                  "pfrJitHeavy share %5.1f%%%s" % (
                      label, x["samples"] if label == "perf" else x["samples"] / 1e7,
                      100 * x["unnamed_leaf"], 100 * x["under_work"], 100 * x["heavy_share"],
                      "  recorder CPU %.1f ms/min" % x["cpu_ms_min"] if "cpu_ms_min" in x
                      else ""))
    print("medians over %d rounds of %d s (true pfrJitHeavy share 75%%):" % (args.rounds,
                                                                           args.seconds))
    for label in [s[0] for s in specs] + ["perf"]:
        med = {k: statistics.median(r[label][k] for r in rounds) for k in rounds[0][label]}
        print("  %-8s unnamed leaf %5.1f%%  under pfrJitWork %5.1f%%  pfrJitHeavy share %5.1f%%%s"
              % (label, 100 * med["unnamed_leaf"], 100 * med["under_work"],
                 100 * med["heavy_share"],
                 "  recorder CPU %.1f ms/min" % med["cpu_ms_min"] if "cpu_ms_min" in med else ""))


if __name__ == "__main__":
    main()
