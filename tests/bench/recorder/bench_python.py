#!/usr/bin/env python3
"""The recorder's own CPU and memory on a host running N Python processes, with Python frames
(python_frames=enabled) beside the same host without (disabled), in one run (issue 34, "Cost").

N python processes run py_truth.py's workloads (split, recurse, sorted, thread, gen, asyncio,
churn in turn) for the whole run. Then, rounds times, a recorder with Python frames and one
without run in turn (ABBA order, so that drifting load falls on both) over the same processes:
each is given a warm-up (its first intervals: the start-up scan, cold caches), then its CPU time
(utime + stime of /proc/PID/stat) over the measured seconds, its resident memory at the end
(VmRSS) and its peak (VmHWM). Prints one line per recorder run and the medians.

Usage: bench_python.py --recorder BIN --python /usr/bin/python3.11 --workload py_truth.py
       [--procs 20] [--seconds 30] [--rounds 2] [--hz 99]
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

MODES = ["split", "recurse", "sorted", "thread", "gen", "asyncio", "churn"]
WARMUP = 8


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        m = re.search(r"^%s:\s+(\d+) kB" % key, f.read(), re.M)
    return int(m.group(1)) if m else 0


def one_run(args, tmp, mode):
    store = os.path.join(tmp, "ring-%s.db" % mode)
    logpath = os.path.join(tmp, "recorder-%s.log" % mode)
    with open(logpath, "w") as logf:
        rec = subprocess.Popen([args.recorder, "--store", store, "--interval", "2", "--cpu-hz",
                                str(args.hz), "--metrics-listen", "off", "--scrape-local", "off",
                                "--go-heap-profiler", "disabled", "--python-frames", mode,
                                "--log-level", "debug"], stdout=logf, stderr=subprocess.STDOUT)
    try:
        end = time.time() + 60
        while ": sampling with" not in open(logpath).read():
            if rec.poll() is not None or time.time() > end:
                raise RuntimeError("the recorder did not start: " + open(logpath).read()[-2000:])
            time.sleep(0.1)
        time.sleep(WARMUP)
        c0, t0 = cpu_seconds(rec.pid), time.time()
        time.sleep(args.seconds)
        c1, t1 = cpu_seconds(rec.pid), time.time()
        rss, hwm = status_kib(rec.pid, "VmRSS"), status_kib(rec.pid, "VmHWM")
    finally:
        rec.send_signal(signal.SIGTERM)
        rec.wait(timeout=60)
    log = open(logpath).read()
    py = re.findall(r"python: samples=(\d+) walked=(\d+).*processes=(\d+) .*"
                    r"cache\{hits=(\d+) bytes=(\d+)", log)
    os.unlink(store)
    return {"mode": mode, "cpu": 100.0 * (c1 - c0) / (t1 - t0), "rss": rss / 1024.0,
            "hwm": hwm / 1024.0, "py": py[-1] if py else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--recorder", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--procs", type=int, default=20)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--hz", type=int, default=99)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (the recorder loads BPF programs)")
        return 77
    tmp = tempfile.mkdtemp(prefix="pfr-benchpy-")
    total = args.rounds * 2 * (args.seconds + WARMUP + 15) + 60
    procs = [subprocess.Popen([args.python, args.workload, MODES[i % len(MODES)], str(total)],
                              stdout=subprocess.DEVNULL) for i in range(args.procs)]
    runs = []
    try:
        time.sleep(3)
        for r in range(args.rounds):
            order = ["enabled", "disabled"] if r % 2 == 0 else ["disabled", "enabled"]
            for mode in order:
                res = one_run(args, tmp, mode)
                runs.append(res)
                py = res["py"]
                print("round %d %-8s recorder CPU %5.2f %% of a core, RSS %6.1f MiB, peak %6.1f "
                      "MiB%s" % (r + 1, mode, res["cpu"], res["rss"], res["hwm"],
                                 ", Python samples %s walked %s, %s processes, code cache %s "
                                 "bytes" % (py[0], py[1], py[2], py[4]) if py else ""),
                      flush=True)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    alive = sum(1 for p in procs if p.returncode == -signal.SIGKILL)
    print("python processes alive to the end: %d of %d" % (alive, args.procs))
    for mode in ("enabled", "disabled"):
        rs = [x for x in runs if x["mode"] == mode]
        print("median python_frames=%-8s CPU %5.2f %% of a core, RSS %6.1f MiB, peak %6.1f MiB"
              % (mode, statistics.median(x["cpu"] for x in rs),
                 statistics.median(x["rss"] for x in rs), statistics.median(x["hwm"] for x in rs)))
    os.rmdir(tmp) if not os.listdir(tmp) else None
    return 0


if __name__ == "__main__":
    sys.exit(main())
