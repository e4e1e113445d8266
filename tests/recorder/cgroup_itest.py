#!/usr/bin/env python3
"""Which cgroup names a process (issue 32): the real recorder, two different programs in one
systemd-like unit cgroup, named as that one service, not by their executables.

Two placements, each with a Python loop and a shell loop (python3 and dash):
- v2: the unit is a cgroup v2 cgroup, /system.slice/pfr-cg-v2-<r>.service (the "0::" line);
- v1: the programs sit in the cgroup v2 root ("0::/", which the node agent passes over) and the
  unit is a cgroup of a v1 hierarchy: the cpu one where it is mounted (a hybrid or v1 host, as
  this project's test machines are), else a name=systemd hierarchy the test mounts itself (a
  cgroup v2 only host; with --v1 name=systemd on any host, the programs also sit in the roots of
  the v1 cpu and memory hierarchies, which the agent reads first). This is where the agent's
  rule and pfr's old one ("0::" first) differ.

Usage: cgroup_itest.py --recorder BIN --dump BIN [--v1 cpu|name=systemd]. Needs root. Exit 0 =
pass, 1 = fail. Samples are counted by the pids the test started (other tests run the same
programs).
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import recorder_itest as ri  # noqa: E402
from hostile_itest import mounts  # noqa: E402

# each program: argv after "exec"; both spin until killed
PROGRAMS = {
    "python3": ["python3", "-c", "while True: pass"],
    "dash": ["dash", "-c", "while :; do :; done"],
}


def v2_mount():
    return next(m[1] for m in mounts() if m[2] == "cgroup2")


def v1_roots(controllers):
    """cgroup.procs of the root of each v1 hierarchy that has one of controllers."""
    return [os.path.join(m[1], "cgroup.procs") for m in mounts()
            if m[2] == "cgroup" and set(controllers) & set(m[3].split(","))]


def v1_hierarchy(kind, tmp, undo):
    """The mount point of a v1 hierarchy: cpu's where mounted (kind "cpu" or None), else a
    name=systemd hierarchy mounted in tmp (unmounted at the end)."""
    if kind in (None, "cpu"):
        m = next((m[1] for m in mounts() if m[2] == "cgroup" and "cpu" in m[3].split(",")), None)
        if m or kind == "cpu":
            if not m:
                raise RuntimeError("no cgroup v1 cpu hierarchy mounted")
            return m, "cpu"
    point = os.path.join(tmp, "name-systemd")
    os.mkdir(point)
    subprocess.run(["mount", "-t", "cgroup", "-o", "none,name=systemd", "cgroup", point],
                   check=True)
    undo.append(lambda: subprocess.run(["umount", point]))
    return point, "name=systemd"


def make_cgroup(base, rel, undo):
    """mkdir base/rel and the folders above it that do not exist; all removed at the end."""
    path = base
    for part in rel.strip("/").split("/"):
        path = os.path.join(path, part)
        if not os.path.isdir(path):
            os.mkdir(path)
            undo.append(lambda p=path: ri.remove_cgroup(p))
    return path


def start_in(cgroups, argv):
    """argv started in each cgroup (a cgroup.procs path): the child joins them before exec, so
    the program never runs anywhere else."""
    def join():
        for p in cgroups:
            with open(p, "w") as f:
                f.write(str(os.getpid()))
    return subprocess.Popen(argv, preexec_fn=join)


def own_comm():
    """This test's comm, which a child it starts keeps until its exec."""
    with open("/proc/self/comm") as f:
        return f.read().strip()


def wait_named(args, store, pids, limit):
    """Poll the ring until every pid has samples: {pid: set of (service, container.id, comm)}.
    A child's samples from before its exec are left out: until then it is this test's Python
    (its comm), running in this test's cgroup until it joins the unit's, and named as such (on a
    loaded host those samples land in an interval of their own: "python3.11", no container id)."""
    end = time.time() + limit
    seen = {}
    mine = own_comm()
    while time.time() < end:
        seen = {p: set() for p in pids}
        for c in ri.dump(args, store):
            for s in c.get("samples", []):
                if s["pid"] in seen and s["comm"] != mine:
                    seen[s["pid"]].add((c["service"], c["labels"].get("container.id", ""),
                                        s["comm"]))
        if all(seen.values()):
            break
        time.sleep(1)
    return seen


def check_unit(name, unit, seen, procs):
    for prog, p in procs.items():
        got = seen.get(p.pid, set())
        if not ri.check(got, "%s: no samples of %s (pid %d)" % (name, prog, p.pid)):
            continue
        services = {s for s, _, _ in got}
        ids = {i for _, i, _ in got}
        ri.log("%s: %s (pid %d) named %r, container.id %r" % (name, prog, p.pid,
                                                             sorted(services), sorted(ids)))
        ri.check(services == {unit}, "%s: %s (pid %d) named %r, not %s" %
                 (name, prog, p.pid, sorted(services), unit))
        ri.check(ids == {unit}, "%s: %s (pid %d) has container.id %r, not %s" %
                 (name, prog, p.pid, sorted(ids), unit))


def test(args, tmp):
    undo, procs = [], []
    try:
        tag = "%d-%s" % (os.getpid(), os.urandom(3).hex())
        v2 = v2_mount()
        v1, kind = v1_hierarchy(args.v1, tmp, undo)
        ri.log("cgroup v2 at %s; v1 hierarchy %s at %s" % (v2, kind, v1))
        unit2 = "/system.slice/pfr-cg-v2-%s.service" % tag
        unit1 = "/system.slice/pfr-cg-v1-%s.service" % tag
        cg2 = make_cgroup(v2, unit2, undo)
        cg1 = make_cgroup(v1, unit1, undo)
        # only what the test checks: CPU profiles (no heap, scrapes, triggers)
        rec = ri.Recorder(args, tmp, ["--interval", "1", "--cpu-hz", "199",
                                      "--go-heap-profiler", "disabled", "--scrape-local", "off",
                                      "--metrics-listen", "off", "--trigger-oom", "false",
                                      "--trigger-fatal-signal", "false", "--trigger-pressure",
                                      "false", "--trigger-pressure-cgroups", "false"])
        # the v1 programs: nothing in the v2 root; with name=systemd, nothing in the v1 cpu and
        # memory roots either, for the agent reads those before name=systemd
        before = v1_roots(["cpu", "memory"]) if kind == "name=systemd" else []
        placed = {
            "v2": (unit2, [os.path.join(cg2, "cgroup.procs")]),
            "v1": (unit1, [os.path.join(v2, "cgroup.procs")] + before +
                   [os.path.join(cg1, "cgroup.procs")]),
        }
        # the Python loop runs as a link of its own name, so that its comm is not this test's
        py = os.path.join(tmp, "pfr-cg-python")
        os.symlink(os.path.realpath(sys.executable), py)
        programs = {prog: [py] + argv[1:] if prog == "python3" else argv
                    for prog, argv in PROGRAMS.items()}
        ri.check(os.path.basename(py) != own_comm(), "the test runs as %s" % own_comm())
        started = {}
        for name, (unit, joins) in placed.items():
            started[name] = {prog: start_in(joins, argv) for prog, argv in programs.items()}
            procs += started[name].values()
        for name, ps in started.items():
            for prog, p in ps.items():
                with open("/proc/%d/cgroup" % p.pid) as f:
                    text = f.read().strip().replace("\n", " | ")
                ri.log("%s: %s pid %d: %s" % (name, prog, p.pid, text))
        seen = wait_named(args, rec.store, [p.pid for p in procs], 60)
        rc, _, _ = rec.stop()
        ri.check(rc == 0, "recorder exit code %d" % rc)
        for name, (unit, _) in placed.items():
            check_unit(name, unit, seen, started[name])
    finally:
        ri.kill_all(procs)
        for u in reversed(undo):
            u()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--recorder", required=True)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--v1", choices=["cpu", "name=systemd"],
                    help="the v1 hierarchy (default: cpu where mounted, else name=systemd)")
    return ri.run_in_tmp(test, ap.parse_args(), "pfr-cgroup-")


if __name__ == "__main__":
    sys.exit(main())
