#!/usr/bin/env python3
"""How well short-lived processes are named on a busy, churning host: each recorder given runs in
turn for --seconds on the churn workload (2 spinners, 300 idle processes, 100 `ls -l /usr/lib` a
second), then its ring is read and the `ls` samples with user frames are counted, with those
whose leaf user frame has no module: the leaf address comes from the registers, not from
unwinding, so an unnamed leaf means the process's mappings were not known. Samples taken inside
execve are counted apart: there the user registers may still hold the old image's addresses
(pfr keeps only their kernel stack).

Usage: churn_naming.py --bench-dir BUILD/tests/bench/recorder --dump BUILD/tests/recorder/recorder_store_dump
                       [--seconds 45] LABEL=RECORDER [LABEL=RECORDER ...]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from bpfstats import host_workload


def leaf_naming(dump, store):
    """(samples with user frames outside execve, of which an unnamed leaf, distinct pids,
    samples inside execve, of which with user frames) of `ls`."""
    out = subprocess.run([dump, store, "--samples"], capture_output=True, text=True, check=True)
    total = unnamed = in_exec = exec_user = 0
    pids = set()
    for line in out.stdout.splitlines():
        for s in json.loads(line).get("samples", []):
            if s["comm"] != "ls":
                continue
            kernel = [f for f in s["frames"] if f["module"] == "[kernel]"]
            user = [f for f in s["frames"] if f["module"] != "[kernel]"]
            if any("execve" in f["function"] for f in kernel):
                in_exec += 1
                exec_user += bool(user)
                continue
            if not user:
                continue
            total += 1
            pids.add(s["pid"])
            unnamed += user[0]["module"] == ""
    return total, unnamed, len(pids), in_exec, exec_user


def run_one(args, label, recorder):
    tmp = tempfile.mkdtemp(prefix="pfr-churn-naming-")
    try:
        d = args.bench_dir
        with host_workload(os.path.join(d, "bench_idler"), os.path.join(d, "bench_spinner"), 300,
                           tmp, os.path.join(d, "bench_churn"), 100) as work:
            with open(os.path.join(tmp, "log"), "w") as log:
                p = subprocess.Popen([recorder, "--store", os.path.join(tmp, "ring.db"),
                                      "--log-level", "debug"], stderr=log)
            time.sleep(2)
            work.roll_call()
            time.sleep(args.seconds)
            p.terminate()
            p.wait()
        total, unnamed, pids, in_exec, exec_user = leaf_naming(args.dump,
                                                               os.path.join(tmp, "ring.db"))
        procs = re.findall(r"processes\{[^}]*\}\}?", open(os.path.join(tmp, "log")).read())
        print("%-8s ls samples with user frames (outside execve) %d, unnamed leaf %d (%.1f %%),"
              " %d processes; inside execve %d, %d with user frames"
              % (label, total, unnamed, 100.0 * unnamed / max(total, 1), pids, in_exec,
                 exec_user))
        if procs:
            print("         " + procs[-1])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench-dir", required=True)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--seconds", type=float, default=45)
    ap.add_argument("recorders", nargs="+", help="LABEL=PATH")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: needs root")
        return 77
    for r in args.recorders:
        label, path = r.split("=", 1)
        run_one(args, label, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
