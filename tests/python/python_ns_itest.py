#!/usr/bin/env python3
"""A python3.11 in a container of its own (issue 34): its own mount and pid namespaces
(unshare --mount --pid --fork) and a root of its own (chroot into a tmpfs holding the host's
/usr/lib and /usr/lib64 and the interpreter bound at /opt/py/bin/python3.11, a path the host
does not have), under the real recorder.

The interpreter is then found only through /proc/PID/root, and its threads' native_thread_id are
their ids in the new pid namespace (the program is pid 1 there, its thread pid 2), which the
sampler must match to walk the right thread.

Checks (python_itest.py's): split (hot_a/hot_b on >= 95 % of the samples, within 5 points of the
share of the work and its in-process oracle's, lines) and thread (the thread hashing with the
GIL released shows its own function, never the GIL holder's); the program ran in a pid namespace
of its own (NSpid) at the path only its root has.

Usage: python_ns_itest.py --recorder BIN --dump BIN --python /usr/bin/python3.11 --workload PY
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import py_harness as ph  # noqa: E402
import python_itest as pi  # noqa: E402  (its checks)

SETUP = r"""
set -e
R=$1; W=$2; PY=$3; shift 3
mount -t tmpfs tmpfs "$R"
mkdir -p "$R/usr/lib" "$R/usr/lib64" "$R/opt/py/bin" "$R/w"
ln -s usr/lib "$R/lib"; ln -s usr/lib64 "$R/lib64"
mount --bind /usr/lib "$R/usr/lib"; mount --bind /usr/lib64 "$R/usr/lib64"
touch "$R/opt/py/bin/python3.11"; mount --bind "$PY" "$R/opt/py/bin/python3.11"
mount --bind "$W" "$R/w"
exec chroot "$R" /opt/py/bin/python3.11 "$@"
"""


def host_pid_of(marker, timeout=20):
    """The host pid of the process whose command line holds marker, and its NSpid line."""
    end = time.time() + timeout
    while time.time() < end:
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                cmd = open("/proc/%s/cmdline" % d, "rb").read().decode(errors="replace")
                st = open("/proc/%s/status" % d).read()
            except OSError:
                continue
            if marker in cmd and cmd.startswith("/opt/py/bin/python3.11\0"):
                return int(d), re.search(r"^NSpid:\s*(.*)$", st, re.M).group(1).split()
        time.sleep(0.05)
    return None, None


def run_in_ns(args, tmp, mode, secs):
    root = os.path.join(tmp, "root-" + mode)
    os.mkdir(root)
    wdir = os.path.dirname(os.path.realpath(args.workload))
    wname = os.path.basename(args.workload)
    p = subprocess.Popen(["unshare", "--mount", "--pid", "--fork", "--propagation", "private",
                          "sh", "-c", SETUP, "setup", root, wdir, args.python,
                          "/w/" + wname, mode, str(secs)], stdout=subprocess.PIPE, text=True)
    pid, nspid = host_pid_of("/w/%s\0%s" % (wname, mode))
    out, _ = p.communicate(timeout=240)
    pi.check(p.returncode == 0, "%s: the namespaced python exited %d" % (mode, p.returncode))
    pi.check(pid is not None and nspid == [str(pid), "1"],
             "%s: ran as pid 1 of a pid namespace of its own, /opt/py/bin/python3.11 (host pid "
             "%s, NSpid %s)" % (mode, pid, nspid))
    return pid, out


def main():
    args = ph.parse_args()
    if not args:
        return 1
    tmp = tempfile.mkdtemp(prefix="pfr-pyns-")
    rec, store, logpath, logf = pi.start_recorder(args.recorder, tmp)
    pids = {}
    try:
        if not rec:
            return 1
        pids["split"], out = run_in_ns(args, tmp, "split", pi.SPLIT_SECONDS)
        splits = pi.splits_printed(out)
        pids["thread"], _ = run_in_ns(args, tmp, "thread", pi.THREAD_SECONDS)
        time.sleep(2.5)  # the last interval
    finally:
        pi.stop_recorder(rec, logf)
    log = open(logpath).read()
    for mode, pid in pids.items():
        m = re.search(r"python: walking process %s \(([^)]*)\)" % pid, log)
        pi.check(bool(m), "%s: walked (%s)" % (mode, m.group(1) if m else "not in the log"))
    src = "/w/" + os.path.basename(args.workload)  # the file as the program named it
    pi.check_split(pi.samples_of(args.dump, store, pids["split"]), splits,
                   os.path.realpath(args.workload), file_as=src)
    pi.check_thread(pi.samples_of(args.dump, store, pids["thread"]))
    if pi.FAILS:
        print("recorder log tail:\n" + log[-2000:])
        print("%d check(s) failed; files kept in %s" % (len(pi.FAILS), tmp))
        return 1
    print("all checks passed")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
