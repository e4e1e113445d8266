#!/usr/bin/env python3
"""A program run from a FUSE file system whose server stops answering, under the real recorder.

The recorder must never block on that file system: every interval is written on time, the file
is left unnamed (its copy worker abandoned, counted, the mount avoided), and SIGTERM stops the
daemon within a few seconds. The server is tests/recorder/hang_fuse.c; the program is a copy of
a calltree workload, run by an unprivileged user (any local user can do this).

Usage: fuse_itest.py --recorder BIN --dump BIN --fuse BIN --workload BIN [--sanitized]
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import recorder_itest as ri  # noqa: E402  (its Recorder, dump and checks)

INTERVAL = 1


def metric(text, name, labels=""):
    m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), text, re.M)
    return float(m.group(1)) if m else None


def folded(text):
    """Intervals each source folded into its next collection (it was still collecting)."""
    return dict(re.findall(r'^pfr_source_intervals_folded_total\{source="(\w+)"\} (\S+)$', text,
                           re.M))


def wait_path(path, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path):
            return True
        time.sleep(0.05)
    return False


def blocked(path, procs):
    """Whether a stat of path hangs. It stays blocked even against SIGKILL once the server has
    read the request: it ends when the server is killed, at the end of the test."""
    p = subprocess.Popen(["stat", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(p)
    time.sleep(2)
    return p.poll() is None


def serve(args, tmp, name, procs, mounts):
    """A FUSE mount serving the workload as prog, and the workload run from it by nobody."""
    mnt = os.path.join(tmp, name)
    os.mkdir(mnt)
    fuse = subprocess.Popen([args.fuse, args.workload, mnt, "-o",
                             "allow_other,attr_timeout=0,entry_timeout=0,negative_timeout=0"])
    procs.insert(0, fuse)  # servers first at the end: killing one ends what it holds
    mounts.append(mnt)
    prog = os.path.join(mnt, "prog")
    if not wait_path(prog, 10):
        raise RuntimeError("the FUSE file system %s did not come up" % name)
    work = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                             prog, "120"])
    procs.append(work)
    return fuse, work, prog


def named(samples):
    """Samples whose frames name the workload's functions (pfr_heavy, pfr_light, ...)."""
    return [s for s in samples if any(f["function"].startswith("pfr_") for f in s["frames"])]


def run(args, tmp, procs, mounts):
    # one mount answers (its program is read as a copy), the other stops answering
    _, good, _ = serve(args, tmp, "good", procs, mounts)
    fuse, work, prog = serve(args, tmp, "hung", procs, mounts)
    time.sleep(1.0)
    ri.check(work.poll() is None and good.poll() is None,
             "the workloads did not start from the mounts")
    fuse.send_signal(signal.SIGUSR1)
    # the handler runs when one of the server's threads next wakes: a request read before it
    # would still be answered
    time.sleep(0.5)
    ri.check(blocked(prog, procs), "the FUSE server still answers after SIGUSR1")

    port = ri.free_port()
    env = {"ASAN_OPTIONS": "detect_leaks=0"} if args.sanitized else None
    rec = ri.Recorder(args, tmp, ["--interval", str(INTERVAL), "--log-level", "info",
                                  "--metrics-listen", "127.0.0.1:%d" % port], env)
    ri.LIVE.append(rec.proc)
    # intervals on time: at each look, the newest CPU interval ended at most an interval and a
    # second (two under the sanitizers) before the look began
    slack = 2.0 if args.sanitized else 1.0
    time.sleep(INTERVAL + slack + 0.5)  # the first interval (a cold cache: it may run long)
    folded0 = folded(ri.fetch_metrics(port))
    worst, looks = ri.lateness(args, rec.store, INTERVAL, 12)
    ri.log("%d looks: the newest interval was at worst %.2f s late" % (looks, worst))
    ri.check(worst <= slack, "an interval was written %.2f s late" % worst)

    text = ri.fetch_metrics(port)
    abandoned = metric(text, "pfr_remote_files_total", '{result="abandoned"}')
    avoided = metric(text, "pfr_remote_files_total", '{result="avoided"}')
    stuck = metric(text, "pfr_remote_file_workers_stuck")
    ri.log("remote files: abandoned=%s avoided=%s stuck=%s" % (abandoned, avoided, stuck))
    ri.check(abandoned is not None and abandoned >= 1, "no copy worker was abandoned")
    ri.check(stuck is not None and stuck >= 1, "no copy worker is counted as stuck")
    folded1 = folded(text)
    ri.log("intervals folded while looked at: before %r, after %r" % (folded0, folded1))
    ri.check(folded1 == folded0, "a source fell behind")

    # both programs were profiled; the answering mount's is named from its copy, the hung
    # one's is left as file+offset
    chunks = ri.dump(args, rec.store)
    ss = [s for c in chunks for s in c["samples"] if s["pid"] == work.pid]
    gs = [s for c in chunks for s in c["samples"] if s["pid"] == good.pid]
    ri.log("samples: hung mount %d (%d named), answering mount %d (%d named)"
           % (len(ss), len(named(ss)), len(gs), len(named(gs))))
    ri.check(len(ss) > 0, "the program on the hung mount was not profiled")
    ri.check(not named(ss), "frames of the hung mount's program were named")
    ri.check(len(named(gs)) > len(gs) / 2, "the answering mount's program was not named")
    copied = metric(text, "pfr_remote_files_total", '{result="copied"}')
    ri.check(copied is not None and copied >= 1, "no remote file was copied")

    rc, secs, _ = rec.stop(timeout=30)
    ri.log("SIGTERM: exit %d after %.2f s" % (rc, secs))
    ri.check(rc == 0, "recorder exit code %d" % rc)
    ri.check(secs < 8, "SIGTERM took %.2f s" % secs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--recorder", required=True)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--fuse", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--sanitized", action="store_true")
    args = ap.parse_args()
    return ri.harness("pfr-fuse-", run, args)

if __name__ == "__main__":
    sys.exit(main())
