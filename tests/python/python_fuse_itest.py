#!/usr/bin/env python3
"""A python3.11 run from FUSE file systems, under the real recorder (issue 34 with issue 30's
rule: no file of another process is opened outside the guard's workers with deadlines).

Two mounts serve a copy of Debian's python3.11 as python3.11 (tests/recorder/hang_fuse.c): one
answers, one stops answering before the recorder starts. Each runs py_truth.py's split.

Checks: every interval is written on time; the answering mount's interpreter is read as the
guard's copy (never opened by the recorder: its debug figures count a copy) and its samples name
hot_a/hot_b; the hung mount's interpreter is not walked (its samples are native only) and the
recorder is not held up by it; SIGTERM stops the recorder within a few seconds.

Usage: python_fuse_itest.py --recorder BIN --dump BIN --fuse BIN --python PY --workload PY
       [--sanitized]
"""
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recorder"))
import recorder_itest as ri  # noqa: E402  (its Recorder, dump, lateness and checks)
import fuse_itest as fi  # noqa: E402  (wait_path, blocked)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import py_harness as ph  # noqa: E402

INTERVAL = 1
SECONDS = 14
MIN_CPU = 1.5  # s of CPU each python gets while recorded, however loaded the machine
MAX_WAIT = 90  # s of recording at most


def cpu_seconds(pid):
    """The process's user + system CPU time so far (0 once it is gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve(args, tmp, name, procs, mounts):
    """A mount serving python3.11, and the split workload run from it."""
    mnt = os.path.join(tmp, name)
    os.mkdir(mnt)
    env = dict(os.environ, HANG_FUSE_NAME="python3.11")
    fuse = subprocess.Popen([args.fuse, args.python, mnt, "-o",
                             "allow_other,attr_timeout=0,entry_timeout=0,negative_timeout=0"],
                            env=env, stderr=subprocess.DEVNULL)
    procs.insert(0, fuse)  # servers first at the end: killing one ends what it holds
    mounts.append(mnt)
    py = os.path.join(mnt, "python3.11")
    if not fi.wait_path(py, 10):
        raise RuntimeError("the FUSE file system %s did not come up" % name)
    work = subprocess.Popen([py, args.workload, "split", str(SECONDS + 6)],
                            stdout=subprocess.DEVNULL)
    procs.append(work)
    return fuse, work, py


def hot(samples):
    return [s for s in samples
            if {"hot_a", "hot_b"} & {f["function"] for f in s["frames"] if f["module"] == "python"}]


def run(args, tmp, procs, mounts):
    _, good, _ = serve(args, tmp, "good", procs, mounts)
    fuse, stuck, py = serve(args, tmp, "hung", procs, mounts)
    time.sleep(1.5)
    ri.check(good.poll() is None and stuck.poll() is None, "the workloads did not start")
    fuse.send_signal(signal.SIGUSR1)
    time.sleep(0.5)
    ri.check(fi.blocked(py, procs), "the FUSE server still answers after SIGUSR1")

    env = {"ASAN_OPTIONS": "detect_leaks=0"} if args.sanitized else None
    rec = ri.Recorder(args, tmp, ["--interval", str(INTERVAL), "--cpu-hz", "99",
                                  "--log-level", "debug", "--python-frames", "enabled",
                                  "--metrics-listen", "off", "--go-heap-profiler", "disabled",
                                  "--scrape-local", "off"], env)
    slack = 2.0 if args.sanitized else 1.0
    time.sleep(INTERVAL + slack + 0.5)  # the first interval (a cold cache: it may run long)

    # the copy started at one look is taken at a later snapshot of any process: make some
    def spawn():
        subprocess.run(["true"])

    # Recorded for SECONDS - 6 and on until each python had MIN_CPU s of CPU (a loaded machine
    # gives the two spinning programs a small share of its cores; the sample counts below are
    # judged by the CPU time each got, not the wall time).
    cpu0 = {p.pid: cpu_seconds(p.pid) for p in (good, stuck)}
    start, worst, looks = time.time(), 0.0, 0
    while True:
        w, n = ri.lateness(args, rec.store, INTERVAL, 2, watch=spawn)
        worst, looks = max(worst, w), looks + n
        got = {pid: cpu_seconds(pid) - c for pid, c in cpu0.items()}
        if time.time() - start >= SECONDS - 6 and min(got.values()) >= MIN_CPU:
            break
        if time.time() - start >= MAX_WAIT:
            break
    ri.log("%d looks: the newest interval was at worst %.2f s late" % (looks, worst))
    ri.log("CPU while recorded: answering mount's python %.2f s, hung mount's %.2f s"
           % (got[good.pid], got[stuck.pid]))
    ri.check(worst <= slack, "an interval was written %.2f s late" % worst)
    rc, secs, _ = rec.stop(timeout=30)
    ri.log("SIGTERM: exit %d after %.2f s" % (rc, secs))
    ri.check(rc == 0, "recorder exit code %d" % rc)
    ri.check(secs < 8, "SIGTERM took %.2f s" % secs)

    log = rec.log_text()
    files = re.findall(r"files\{read=(\d+) hits=(\d+) copies=(\d+) refused=(\d+)\}", log)
    copies = int(files[-1][2]) if files else 0
    ri.log("interpreter files: %s" % (files[-1:],))
    ri.check(copies >= 1, "no interpreter file was read as the guard's copy")
    ri.check("walking process %d " % good.pid in log, "the answering mount's python not walked")
    ri.check("walking process %d " % stuck.pid not in log, "the hung mount's python was walked")
    chunks = ri.dump(args, rec.store)
    gs, ss = ph.samples(chunks, good.pid), ph.samples(chunks, stuck.pid)
    ri.log("samples: answering mount %d (%d in hot_a/hot_b), hung mount %d (%d)"
           % (len(gs), len(hot(gs)), len(ss), len(hot(ss))))
    # at 99 Hz of CPU time, at least half the samples its CPU time while recorded asks for
    need = {pid: max(50, int(0.5 * 99 * c)) for pid, c in got.items()}
    ri.check(len(gs) >= need[good.pid] and len(hot(gs)) >= len(gs) // 2,
             "the answering mount's python: %d of %d samples name hot_a/hot_b (%d needed)"
             % (len(hot(gs)), len(gs), need[good.pid]))
    ri.check(len(ss) >= need[stuck.pid] and not hot(ss),
             "the hung mount's python: %d samples (%d needed), %d named"
             % (len(ss), need[stuck.pid], len(hot(ss))))


def main():
    args = ph.parse_args("--fuse", "--sanitized")
    return ph.harness("pfr-pyfuse-", run, args) if args else 1

if __name__ == "__main__":
    sys.exit(main())
