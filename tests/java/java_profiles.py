#!/usr/bin/env python3
"""Java profiles end to end (docs/java.md): the real recorder with java_profiler enabled on the
ground-truth workload (tests/java/workload/JfrWorkload.java), read back with the real query tool.

The JVM runs in a cgroup of its own (a systemd-like unit under cgroup v2), so that its service
and container.id are its own and cannot be mixed with other JVMs of the host (the recorder
attaches every JVM it finds; other tests' and sessions' JVMs are in the ring too: everything
here is judged by the workload's service and pid). Checks:

  types     the ring lists java:cpu:nanoseconds, java:heap_alloc_objects:count,
            java:heap_alloc_space:bytes, java:lock_contentions:count and
            java:lock_delay:nanoseconds for the workload's service (`pfr ls --format json`)
  CPU       hotMethod's share of hotMethod + coldMethod (`pfr flame --format folded`) within
            5 points of the time the workload measured in each (3:1 by design)
  alloc     allocBig's share of the bytes of allocBig + allocSmall within 5 points of the
            bytes the workload counted at each site
  lock      contendedMethod in both lock types; parkedMethod (jdk.ThreadPark) in neither;
            monitor waits across a chunk rotation or a dump keep their stacks (taken from an
            earlier chunk: pfr_java_earlier_stacks_total > 0)
  identity  the Java profiles and the JVM's eBPF CPU samples are under the same service and
            the same profile labels (container.id = the unit, host.name, host.id)

--keep-ring FILE writes the service's chunks as a ring slice (`pfr export --ring`) with a
FILE.json of what the shipper's test checks (tests/shipper/it_java_coroot.sh).

usage: java_profiles.py --recorder BIN --query PFR --jdk DIR --classes DIR [--seconds N]
                        [--keep-ring FILE]. Needs root. Exit 0 = pass.
"""
import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from java_itest import LIVE, Recorder, fail, log  # noqa: E402

JAVA_TYPES = ["java:cpu:nanoseconds", "java:heap_alloc_objects:count",
              "java:heap_alloc_space:bytes", "java:lock_contentions:count",
              "java:lock_delay:nanoseconds"]
INTERVAL = "2"


def v2_mount():
    with open("/proc/self/mounts") as f:
        for line in f:
            dev, mnt, fstype = line.split()[:3]
            if fstype == "cgroup2":
                return mnt
    fail("no cgroup2 mount")


def query(args, *argv):
    cmd = [args.query, "--store", args.ring] + list(argv)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail("%s: exit %d: %s" % (" ".join(cmd), r.returncode, r.stderr.strip()))
    return r.stdout


def folded(args, service, typ, labels):
    """{frame: total of the stacks through it} and the grand total, from pfr flame --folded."""
    argv = ["flame", "--service", service, "--type", typ, "--from", "-1h", "--format", "folded"]
    for k, v in labels.items():
        argv += ["--label", "%s=%s" % (k, v)]
    through, total = collections.Counter(), 0
    for line in query(args, *argv).splitlines():
        stack, value = line.rsplit(" ", 1)
        total += int(value)
        for frame in set(stack.split(";")):
            through[frame] += int(value)
    return through, total


def share(through, a, b):
    x, y = through.get("JfrWorkload." + a, 0), through.get("JfrWorkload." + b, 0)
    return (100.0 * x / (x + y) if x + y else float("nan")), x, y


def start_workload(args, tmp, cgroup):
    def join():
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    out = open(os.path.join(tmp, "workload.out"), "w")
    cmd = [os.path.join(args.jdk, "java"), "-Xmx256m", "-cp", args.classes, "JfrWorkload",
           str(args.seconds)]
    log("starting in %s: %s" % (cgroup, " ".join(cmd)))
    p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, preexec_fn=join,
                         start_new_session=True)
    LIVE.append(p)
    return p, out.name


def truth_of(path):
    with open(path) as f:
        text = f.read()
    vals = {}
    for line in text.splitlines():
        for kv in line.split()[1:]:
            k, _, v = kv.partition("=")
            if v.isdigit():
                vals[line.split()[0] + "." + k] = int(v)
    if "done" not in text or len(vals) != 4:
        fail("the workload printed no truth: %s" % text[-2000:])
    return vals


def run(args, tmp):
    tag = "%d-%s" % (os.getpid(), os.urandom(3).hex())
    unit = "/system.slice/pfr-java-e2e-%s.service" % tag
    cgroup = v2_mount() + unit
    os.makedirs(cgroup)
    try:
        return checks(args, tmp, unit, cgroup)
    finally:
        for p in LIVE:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, 9)
                except (ProcessLookupError, PermissionError):
                    p.kill()
                p.wait()
        for _ in range(50):
            try:
                os.rmdir(cgroup)
                break
            except OSError:
                time.sleep(0.1)


def checks(args, tmp, unit, cgroup):
    rec = Recorder(args, tmp, interval=INTERVAL)
    args.ring = os.path.join(tmp, "ring.db")
    jvm, outpath = start_workload(args, tmp, cgroup)
    pid = jvm.pid
    rec.wait_jvm(pid, ": recording, started in", 1, 60)
    rc = jvm.wait(timeout=args.seconds + 120)
    if rc != 0:
        fail("the workload exited %d" % rc)
    truth = truth_of(outpath)
    dumps = rec.jvm_lines(pid, ": dump of ")
    log("workload truth %r; %d dumps" % (truth, len(dumps)))
    if len(dumps) < 3:
        fail("fewer than 3 dumps of the workload: %r" % rec.jvm_lines(pid, ""))
    if rec.jvm_lines(pid, "conversion"):
        fail("conversion errors: %r" % rec.jvm_lines(pid, "conversion"))
    time.sleep(2 * float(INTERVAL) + 1)  # the last dump's profiles go out at the next collect
    earlier = rec.metric("pfr_java_earlier_stacks_total")
    rec.stop()

    ls = json.loads(query(args, "ls", "--format", "json", "--values", "1000"))
    svc = next((s for s in ls["services"] if s["name"] == unit), None)
    if not svc:
        fail("no service %s in the ring: %r" % (unit, [s["name"] for s in ls["services"]]))
    log("service %s: types %r, labels %r" % (unit, svc["types"], svc["labels"]))
    missing = [t for t in JAVA_TYPES + ["ebpf:cpu:nanoseconds"] if t not in svc["types"]]
    if missing:
        fail("the ring has no %r for the workload's service" % missing)
    labels = svc["labels"]
    if labels.get("container.id") != [unit] or len(labels.get("host.name", [])) != 1 or \
            len(labels.get("host.id", [])) != 1 or labels.get("pid") != [str(pid)]:
        fail("the service's profile labels are not one container, one host and the JVM's pid: "
             "%r" % labels)
    ident = {k: labels[k][0] for k in ("container.id", "host.name", "host.id")}

    failures = []

    def check(cond, msg):
        log(("ok   " if cond else "FAIL ") + msg)
        if not cond:
            failures.append(msg)

    # identity: the same service and profile labels select both sources' profiles
    ebpf, ebpf_total = folded(args, unit, "ebpf:cpu:nanoseconds", ident)
    check(ebpf_total > 0, "the JVM's eBPF CPU samples under %s %r: %d ns" % (unit, ident,
                                                                             ebpf_total))
    java_ident = dict(ident, pid=str(pid))
    got = {}
    for t in JAVA_TYPES:
        got[t] = folded(args, unit, t, java_ident)
        check(got[t][1] > 0, "%s under the same service and labels (pid %d): total %d"
              % (t, pid, got[t][1]))

    cpu, hot, cold = share(got["java:cpu:nanoseconds"][0], "hotMethod", "coldMethod")
    cpu_truth = 100.0 * truth["cpu.hot"] / (truth["cpu.hot"] + truth["cpu.cold"])
    check(abs(cpu - cpu_truth) <= 5.0, "CPU hotMethod %.1f %% of hot+cold (truth %.1f %%; %d "
          "and %d ms sampled)" % (cpu, cpu_truth, hot // 1000000, cold // 1000000))
    alloc, big, small = share(got["java:heap_alloc_space:bytes"][0], "allocBig", "allocSmall")
    alloc_truth = 100.0 * truth["alloc.big"] / (truth["alloc.big"] + truth["alloc.small"])
    check(abs(alloc - alloc_truth) <= 5.0, "alloc bytes allocBig %.1f %% of big+small (truth "
          "%.1f %%, the bytes the workload counted; %d and %d bytes sampled)"
          % (alloc, alloc_truth, big, small))
    objs, nbig, nsmall = share(got["java:heap_alloc_objects:count"][0], "allocBig", "allocSmall")
    check(nbig > 0 and nsmall > 0, "allocation samples at both sites (%d, %d)" % (nbig, nsmall))
    # the workload's monitor waits span its chunk rotations and pfr's dumps: their events
    # name stacks that only an earlier chunk's pools hold
    check(earlier is not None and earlier > 0, "samples given an earlier chunk's stack "
          "(pfr_java_earlier_stacks_total): %s" % earlier)
    for t in ("java:lock_contentions:count", "java:lock_delay:nanoseconds"):
        through = got[t][0]
        check(through.get("JfrWorkload.contendedMethod", 0) > 0,
              "%s: JfrWorkload.contendedMethod %d" % (t, through.get("JfrWorkload.contendedMethod", 0)))
        check("JfrWorkload.parkedMethod" not in through,
              "%s: parkedMethod (jdk.ThreadPark) left out" % t)

    if args.keep_ring and not failures:
        os.makedirs(os.path.dirname(os.path.abspath(args.keep_ring)), exist_ok=True)
        if os.path.exists(args.keep_ring):
            os.unlink(args.keep_ring)
        query(args, "export", "--ring", args.keep_ring, "--service", unit, "--from", "-1h",
              "--to", "now")
        with open(args.keep_ring + ".json", "w") as f:
            json.dump({"service": unit, "pid": pid, "labels": ident, "truth": truth,
                       "cpu_share": cpu, "alloc_share": alloc}, f)
        log("ring slice of %s in %s" % (unit, args.keep_ring))
    return failures


def main():
    ap = argparse.ArgumentParser()
    for a in ("recorder", "query", "jdk", "classes"):
        ap.add_argument("--" + a, required=True)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--keep-ring")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("FAIL: needs root")
        return 1
    tmp = tempfile.mkdtemp(prefix="pfr-java-profiles-")
    try:
        failures = run(args, tmp)
    except AssertionError as e:
        failures = [str(e)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print("FAIL: %s" % f)
    print("PASS" if not failures else "%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
