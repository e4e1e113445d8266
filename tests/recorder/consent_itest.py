#!/usr/bin/env python3
"""Consent (issue 32): a process whose environment has COROOT_EBPF_PROFILING=disabled (the node
agent's variable) or PFR_PROFILING=disabled is profiled by no source of the real recorder.

Three busy C programs (pfr-consent-spin), each in a systemd-like unit cgroup of its own so that
each is a service of its own: one with COROOT_EBPF_PROFILING=disabled, one with
PFR_PROFILING=disabled, one with neither. The recorder runs with its default sources. Once the
third has samples in the ring and a few more intervals have passed: the ring holds no chunk of
any type of the first two services and no sample of their pids, holds the third's, and the
metrics count the two processes (pfr_processes_opted_out_total) and their dropped samples.

Usage: consent_itest.py --recorder BIN --dump BIN --spin BIN. Needs root. Exit 0 = pass.
"""
import argparse
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import recorder_itest as ri  # noqa: E402
from cgroup_itest import make_cgroup, own_comm, v2_mount  # noqa: E402

VARIANTS = {
    "coroot": {"COROOT_EBPF_PROFILING": "disabled"},
    "pfr": {"PFR_PROFILING": "disabled"},
    "on": {},
}


def metric(text, name):
    m = re.search(r"^%s(?:\{[^}]*\})? (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None


def test(args, tmp):
    undo, procs = [], []
    try:
        tag = "%d-%s" % (os.getpid(), os.urandom(3).hex())
        v2 = v2_mount()
        port = ri.free_port()
        rec = ri.Recorder(args, tmp, ["--interval", "1", "--cpu-hz", "199",
                                      "--metrics-listen", "127.0.0.1:%d" % port])
        units, started = {}, {}
        for name, env in VARIANTS.items():
            units[name] = "/system.slice/pfr-consent-%s-%s.service" % (name, tag)
            cg = make_cgroup(v2, units[name], undo)
            e = {k: v for k, v in os.environ.items()
                 if k not in ("COROOT_EBPF_PROFILING", "PFR_PROFILING")}
            e.update(env)
            p = start_in_env([os.path.join(cg, "cgroup.procs")], [args.spin], e)
            procs.append(p)
            started[name] = p
            ri.log("%s: pid %d in %s, env %r" % (name, p.pid, units[name], env))
        end = time.time() + 60
        on_pid = started["on"].pid
        while time.time() < end:
            if any(s["pid"] == on_pid for c in ri.dump(args, rec.store)
                   for s in c.get("samples", [])):
                break
            time.sleep(1)
        time.sleep(3)  # a few more intervals for the others' samples, were they kept
        metrics = ri.fetch_metrics(port)
        chunks = ri.dump(args, rec.store)
        rc, _, _ = rec.stop()
        ri.check(rc == 0, "recorder exit code %d" % rc)
        by_service = {}
        test_comm = own_comm()
        for c in chunks:
            by_service.setdefault(c["service"], []).append(c)
        for name in ("coroot", "pfr"):
            pid = started[name].pid
            ri.check(units[name] not in by_service, "%s: %d chunk(s) of %s in the ring (types %r)"
                     % (name, len(by_service.get(units[name], [])), units[name],
                        sorted({t for c in by_service.get(units[name], []) for t in c["types"]})))
            # until its exec the child is this test's Python (its comm, its environment: not
            # opted out), joining the unit's cgroup; a loaded host samples it there at times
            mine = [s for c in chunks for s in c.get("samples", []) if s["pid"] == pid]
            before = sum(1 for s in mine if s["comm"] == test_comm)
            if before:
                ri.log("%s: %d sample(s) of pid %d from before its exec (comm %s), kept"
                       % (name, before, pid, test_comm))
            n = len(mine) - before
            ri.check(n == 0, "%s: %d sample(s) of pid %d in the ring" % (name, n, pid))
        on = by_service.get(units["on"], [])
        ri.check(on, "on: no chunk of %s in the ring" % units["on"])
        ri.log("on: %d chunk(s) of %s" % (len(on), units["on"]))
        opted = metric(metrics, "pfr_processes_opted_out_total")
        dropped = metric(metrics, "pfr_cpu_samples_opted_out_total")
        ri.log("metrics: pfr_processes_opted_out_total %r, pfr_cpu_samples_opted_out_total %r"
               % (opted, dropped))
        ri.check(opted is not None and opted >= 2,
                 "pfr_processes_opted_out_total %r, want at least the 2 started" % opted)
        ri.check(dropped is not None and dropped > 0,
                 "pfr_cpu_samples_opted_out_total %r: the busy opted-out processes were not "
                 "sampled?" % dropped)
    finally:
        ri.kill_all(procs)
        for u in reversed(undo):
            u()


def start_in_env(cgroups, argv, env):
    """argv with env, started in each cgroup (a cgroup.procs path): the child joins them before
    its exec, so the program never runs anywhere else."""

    def join():
        for p in cgroups:
            with open(p, "w") as f:
                f.write(str(os.getpid()))
    return subprocess.Popen(argv, preexec_fn=join, env=env)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--recorder", required=True)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--spin", required=True)
    return ri.run_in_tmp(test, ap.parse_args(), "pfr-consent-")


if __name__ == "__main__":
    sys.exit(main())
