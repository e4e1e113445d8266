#!/usr/bin/env python3
"""Triggers of the real pfr-recorder with the real events (issue 31, section 4).

Usage: triggers_itest.py --recorder BIN --dump BIN --victim BIN TEST
TEST: oom (a process OOM-killed in a cgroup with a small memory limit), signal (deaths by
SIGSEGV and SIGABRT trigger; a handled SIGSEGV and an exit status of 11 do not), pressure (CPU
hogs in a cgroup of their own past a low threshold), pin (POST /pin: good requests, coalescing,
the rate limit, bad input, clients off the loopback), heap (a cgroup's memory.events "high"
count rising, then its memory pressure, bring a Go program's heap profile before
go_heap_interval; the cgroup is a fake cgroupfs the test writes, named by cgroup_root, since a
real memory.high event needs cgroup v2's memory controller).
Each test checks the recorder's log and metrics for its own processes' pids (other tests on the
host crash programs too). Exit 0 = pass, 1 = fail.
"""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import recorder_itest as ri  # noqa: E402
from hostile_itest import memory_cgroup, mounts  # noqa: E402

SERVICE = "pfr-trig-victim"  # the victims' executable's name: their service


def start(args, tmp, extra, port=None):
    """A recorder with the short windows the tests want (5 s before, 1 s after), nothing but the
    CPU source, and only the triggers of the test (extra)."""
    flags = ["--interval", "1s", "--go-heap-profiler", "disabled", "--pin-before", "5s",
             "--pin-after", "1s", "--metrics-listen", "127.0.0.1:%d" % (port or ri.free_port())]
    return up(ri.Recorder(args, tmp, flags + extra))


def up(rec):
    """rec once its triggers are running (they log their settings before the recorder's
    "sampling with" line: this says so where a test depends on them)."""
    rec.wait_log("triggers: oom=", 30)
    return rec


def wait_line(rec, pattern, timeout):
    """The first log line matching pattern (a regex), or None after timeout."""
    end = time.time() + timeout
    rx = re.compile(pattern)
    while time.time() < end:
        for line in rec.log_text().splitlines():
            if rx.search(line):
                return line
        time.sleep(0.1)
    return None


def metric(port, name, reason):
    text = ri.fetch_metrics(port)
    m = re.search(r'^%s\{reason="%s"\} (\S+)$' % (name, reason), text, re.M)
    return float(m.group(1)) if m else None


def window_seconds(line):
    """to - from of a 'pin requested' line, in seconds."""
    m = re.search(r"from=(\S+) to=(\S+)", line)
    t = [time.mktime(time.strptime(v, "%Y-%m-%dT%H:%M:%SZ")) for v in m.groups()]
    return t[1] - t[0]


def test_oom(args, tmp):
    port = ri.free_port()
    rec = start(args, tmp, ["--trigger-fatal-signal", "false", "--trigger-pressure", "false",
                            "--trigger-pressure-cgroups", "false"], port)
    cg, kind = memory_cgroup(os.path.basename(tmp), 24 << 20)
    victims = []
    try:
        ri.log("memory cgroup %s (%s), 24 MiB" % (cg, kind))
        # the victim joins the cgroup before it execs, so every byte it touches is charged there
        p = subprocess.Popen(["sh", "-c", 'echo $$ > "$1/cgroup.procs" && exec "$2" alloc', "sh",
                              cg, args.victim])
        victims.append(p)
        rc = p.wait(timeout=30)
        ri.check(rc == -signal.SIGKILL, "the victim was not OOM-killed (exit %r)" % rc)
        fired = wait_line(rec, r"trigger oom_kill: service=%s .*OOM kill: pid %d \(%s\)"
                          % (SERVICE, p.pid, SERVICE), 10)
        ri.check(fired, "no oom_kill trigger for pid %d" % p.pid)
        req = wait_line(rec, r"pin requested: oom_kill service=%s .*OOM kill: pid %d "
                        % (SERVICE, p.pid), 10)
        if ri.check(req, "no pin request for the OOM kill of pid %d" % p.pid):
            w = window_seconds(req)
            ri.check(5 <= w <= 7, "the request's window is %.0f s, not 5 s before + 1 s after" % w)
        n = metric(port, "pfr_pins_requested_total", "oom_kill")
        ri.check(n is not None and n >= 1, "pfr_pins_requested_total{oom_kill} is %r" % n)
        check_pinned(args, rec, "oom_kill", "OOM kill: pid %d " % p.pid)
    finally:
        ri.kill_all(victims)  # one the OOM killer spared must not outlive the test
        for _ in range(50):
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.1)


def check_pinned(args, rec, kind, reason_part):
    """The request became a pin of the ring (pfr pins, read as an operator would), made by
    trigger:<kind> with the event in its reason."""
    ri.check(wait_line(rec, r"pinned: pin \d+ \(%s\)" % kind, 10),
             "no pin was made for the %s request" % kind)
    out = subprocess.run([args.query, "--store", rec.store, "pins", "--format", "json"],
                         capture_output=True, text=True, timeout=30)
    ri.check(out.returncode == 0, "pfr pins failed: %s" % out.stderr.strip())
    pins = json.loads(out.stdout or "[]") if out.returncode == 0 else []
    mine = [x for x in pins if x.get("origin") == "trigger:" + kind and
            reason_part in x.get("reason", "")]
    ri.check(len(mine) == 1 and mine[0].get("automatic") is True,
             "pins of trigger:%s with %r: %r" % (kind, reason_part, pins))


def run_victim(args, mode):
    p = subprocess.Popen([args.victim, mode], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    return p, p.wait(timeout=30)


def test_signal(args, tmp):
    port = ri.free_port()
    rec = start(args, tmp, ["--trigger-oom", "false", "--trigger-pressure", "false",
                            "--trigger-pressure-cgroups", "false", "--pin-max-window", "1h"],
                port)
    # first those that must not trigger, then those that must: the ring buffer keeps the order,
    # so once the last one is seen, the first ones would have been seen too
    handled, rc_h = run_victim(args, "handled")
    ri.check(rc_h == 0, "the handling victim did not survive its SIGSEGVs (exit %r)" % rc_h)
    exit11, rc_e = run_victim(args, "exit11")
    ri.check(rc_e == 11, "exit11 exited %r" % rc_e)
    segv, rc_s = run_victim(args, "segv")
    ri.check(rc_s == -signal.SIGSEGV, "segv exited %r" % rc_s)
    abrt, rc_a = run_victim(args, "abort")
    ri.check(rc_a == -signal.SIGABRT, "abort exited %r" % rc_a)
    ri.check(wait_line(rec, r"trigger fatal_signal: service=%s \(new request\): pid %d \(%s\) "
                       r"died of SIGSEGV" % (SERVICE, segv.pid, SERVICE), 10),
             "no fatal_signal trigger for the SIGSEGV of pid %d" % segv.pid)
    # the abort's window overlaps the SIGSEGV's: one request of the service, two events
    ri.check(wait_line(rec, r"trigger fatal_signal: service=%s \(extends the pending request\): "
                       r"pid %d \(%s\) died of SIGABRT" % (SERVICE, abrt.pid, SERVICE), 10),
             "the SIGABRT of pid %d did not extend the pending request" % abrt.pid)
    req = wait_line(rec, r"pin requested: fatal_signal service=%s .* events=2: pid %d .*SIGSEGV"
                    % (SERVICE, segv.pid), 10)
    ri.check(req, "no single request for the SIGSEGV and the SIGABRT")
    text = rec.log_text()
    for p, what in ((handled, "a handled SIGSEGV"), (exit11, "exit status 11")):
        ri.check("pid %d " % p.pid not in text, "%s (pid %d) triggered" % (what, p.pid))
    n = metric(port, "pfr_triggers_coalesced_total", "fatal_signal")
    ri.check(n is not None and n >= 1, "pfr_triggers_coalesced_total{fatal_signal} is %r" % n)


def v2_cgroup(name):
    """A child of the cgroup v2 root (no controller needed: PSI is kept for every cgroup)."""
    root = next(m[1] for m in mounts() if m[2] == "cgroup2")
    path = os.path.join(root, name)
    os.mkdir(path)
    if not os.path.exists(os.path.join(path, "cpu.pressure")):
        raise RuntimeError("%s has no cpu.pressure: a kernel without PSI" % path)
    return root, path


def test_pressure(args, tmp):
    name = os.path.basename(tmp)
    root, cg = v2_cgroup(name)
    hogs = []
    try:
        rec = start(args, tmp, ["--trigger-oom", "false", "--trigger-fatal-signal", "false",
                                "--trigger-pressure", "false", "--pressure-cpu-percent", "20",
                                "--pressure-cpu-for", "2s", "--pressure-poll", "500ms"])
        # one hog more than CPUs, at nice 19: they wait for each other and for every other
        # task of the host, so their cgroup's "some" pressure is high, while the host's other
        # work (other tests) goes first
        n = os.cpu_count() + 1
        for _ in range(n):
            hogs.append(subprocess.Popen(
                ["sh", "-c", 'echo $$ > "$1/cgroup.procs" && exec nice -n 19 "$2" spin 40', "sh",
                 cg, args.victim]))
        line = wait_line(rec, r"trigger pressure_cpu: service=%s \(new request\): cgroup CPU "
                         r"pressure: some avg10 .* cgroup /%s$" % (SERVICE, re.escape(name)), 40)
        if not ri.check(line, "no CPU pressure trigger for cgroup /%s" % name):
            with open(os.path.join(cg, "cpu.pressure")) as f:
                ri.log("cpu.pressure: " + f.read())
        else:
            ri.log(line)
    finally:
        ri.kill_all(hogs)
        for _ in range(50):
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.1)


def post(port, query, host="127.0.0.1"):
    """(status, body) of POST /pin?query."""
    req = urllib.request.Request("http://%s:%d/pin?%s" % (host, port, query), method="POST",
                                 data=b"")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def own_address():
    """An address of this host that is not the loopback (the route out's source)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # TEST-NET-1: nothing is sent
        return s.getsockname()[0]


def test_pin(args, tmp):
    port = ri.free_port()
    rec = up(ri.Recorder(args, tmp, ["--interval", "1s", "--go-heap-profiler", "disabled",
                                     "--trigger-oom", "false", "--trigger-fatal-signal", "false",
                                     "--trigger-pressure", "false", "--trigger-pressure-cgroups",
                                     "false", "--max-pins-per-hour", "2",
                                     "--metrics-listen", "0.0.0.0:%d" % port]))
    q = urllib.parse.urlencode
    # a range already over: handed over at once
    code, body = post(port, q({"service": "web", "reason": "alert HighLatency fired",
                               "from": "-3m", "to": "-2m"}))
    ri.check(code == 202 and "accepted" in body, "POST /pin: %d %s" % (code, body))
    ri.check(wait_line(rec, r"pin requested: external service=web .* events=1: alert HighLatency "
                       r"fired$", 5), "the external request was not handed over")
    check_pinned(args, rec, "external", "alert HighLatency fired")
    # around now: pending until SIGTERM; an overlapping one extends it
    code, body = post(port, q({"service": "db", "reason": "disk alert", "before": "1m",
                               "after": "10m"}))
    ri.check(code == 202, "POST /pin before/after: %d %s" % (code, body))
    code, body = post(port, q({"service": "db", "reason": "second alert", "before": "2m",
                               "after": "1m"}))
    ri.check(code == 202 and "extends" in body, "overlapping POST /pin: %d %s" % (code, body))
    # the rate limit: web's third new request within the hour
    code, _ = post(port, q({"service": "web", "reason": "again", "from": "-50m", "to": "-45m"}))
    ri.check(code == 202, "web's second request: %d" % code)
    code, body = post(port, q({"service": "web", "reason": "and again", "from": "-40m",
                               "to": "-35m"}))
    ri.check(code == 429 and "max_pins_per_hour" in body, "web's third request: %d %s"
             % (code, body))
    # bad input: clear 400s
    bad = [({"service": "web", "from": "-1m", "to": "now"}, "reason is required"),
           ({"reason": "x", "from": "soon", "to": "now"}, "from: "),
           ({"reason": "x", "from": "-1m", "to": "-2m"}, "from is after to"),
           ({"reason": "x", "from": "-1m"}, "from and to go together"),
           ({"reason": "r" * 1025}, "reason is 1025 bytes, more than 1024"),
           ({"reason": "x", "colour": "red"}, "unknown parameter 'colour'")]
    for params, want in bad:
        code, body = post(port, q(params))
        ri.check(code == 400 and want in body, "%r: %d %s (want 400 %r)"
                 % (list(params)[:2], code, body.strip(), want))
    code, body = post(port, q({"reason": "r" * 1024}))
    ri.check(code == 202, "a reason of 1024 bytes: %d %s" % (code, body[:80]))
    # another host: refused though the listener binds every address
    addr = own_address()
    ri.check(not addr.startswith("127."), "no address off the loopback to test with (%s)" % addr)
    code, body = post(port, q({"reason": "from afar"}), host=addr)
    ri.check(code == 403 and "loopback" in body, "POST /pin from %s: %d %s" % (addr, code, body))
    ri.check(metric(port, "pfr_triggers_suppressed_total", "external") == 1,
             "pfr_triggers_suppressed_total{external} is not 1")
    rc, _, _ = rec.stop()
    ri.check(rc == 0, "the recorder exited %d" % rc)
    text = rec.log_text()
    ri.check(re.search(r"pin requested: external service=db .* events=2: disk alert \(\+1 more "
                       r"events\)$", text, re.M), "db's pending request was not handed over at "
             "SIGTERM as one request of two events")
    ri.check("from afar" not in text, "the refused request reached the triggers")


def heap_chunks(args, store, pid):
    return [c for c in ri.dump(args, store, "--meta") if c["labels"].get("pid") == str(pid)
            and any(t.startswith("go_runtime:heap") for t in c["types"])]


def wait_heap_chunks(args, store, pid, n, limit):
    end = time.time() + limit
    cs = heap_chunks(args, store, pid)
    while len(cs) < n and time.time() < end:
        time.sleep(0.3)
        cs = heap_chunks(args, store, pid)
    return cs


def phase(go):
    """One round of the Go program's allocations."""
    go.stdin.write("phase\n")
    go.stdin.flush()
    ri.check(go.stdout.readline().startswith("done"), "pfr-goheap-alloc's allocation phase")


def write_file(path, text):
    with open(path, "w") as f:
        f.write(text)


def test_heap(args, tmp):
    exe = os.path.join(os.path.dirname(args.victim), "pfr-goheap-alloc")
    go = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        ri.check(go.stdout.readline().strip() == "ready", "pfr-goheap-alloc did not start")
        # a cgroupfs of one cgroup holding the Go program, whose files the test writes
        cg = os.path.join(tmp, "cgroupfs", "app")
        os.makedirs(cg)
        write_file(os.path.join(cg, "cgroup.procs"), "%d\n" % go.pid)
        calm = "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
        write_file(os.path.join(cg, "cpu.pressure"), calm)
        write_file(os.path.join(cg, "memory.pressure"), calm)
        write_file(os.path.join(cg, "memory.events"), "low 0\nhigh 0\nmax 0\noom 0\n")
        rec = up(ri.Recorder(args, tmp, [
            "--interval", "1s", "--go-heap-profiler", "force", "--go-heap-interval", "1h",
            "--metrics-listen", "off", "--trigger-oom", "false", "--trigger-fatal-signal",
            "false", "--trigger-pressure", "false", "--cgroup-root",
            os.path.join(tmp, "cgroupfs"), "--pressure-poll", "200ms",
            "--pressure-memory-percent", "10", "--pressure-memory-for", "1s",
            "--heap-min-gap", "1s", "--pin-before", "5s", "--pin-after", "1s"]))
        # the first collection, at start, switches the program's heap sampling on; the next
        # is due in an hour
        ri.check(rec.wait_log("MemProfileRate was 0", 20), "pid %d not visited" % go.pid)
        phase(go)
        time.sleep(1)
        first = heap_chunks(args, rec.store, go.pid)
        time.sleep(1.5)  # more than an interval
        ri.check(len(heap_chunks(args, rec.store, go.pid)) == len(first),
                 "a heap profile came without a trigger")
        write_file(os.path.join(cg, "memory.events"), "low 0\nhigh 3\nmax 0\noom 0\n")
        ri.check(wait_line(rec, r"memory pressure in cgroup /app: Go heap profiles of its 1 "
                           r"processes", 5), "memory.events high rising asked for no heap")
        cs = wait_heap_chunks(args, rec.store, go.pid, len(first) + 1, 10)
        ri.check(len(cs) > len(first), "no early heap profile after memory.events high rose")
        # memory pressure: a trigger for the Go program's service, and its heap again
        phase(go)
        n = len(heap_chunks(args, rec.store, go.pid))
        write_file(os.path.join(cg, "memory.pressure"),
                   "some avg10=35.00 avg60=5.00 avg300=1.00 total=123\n")
        ri.check(wait_line(rec, r"trigger pressure_memory: service=pfr-goheap-alloc \(new "
                           r"request\): cgroup memory pressure: some avg10 35\.0% >= 10% for 1 s, "
                           r"cgroup /app$", 10), "no memory pressure trigger for cgroup /app")
        cs = wait_heap_chunks(args, rec.store, go.pid, n + 1, 10)
        ri.check(len(cs) > n, "no early heap profile after memory pressure")
        rc, _, _ = rec.stop()
        ri.check(rc == 0, "the recorder exited %d" % rc)
    finally:
        go.kill()
        go.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--recorder", required=True)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--victim", required=True)
    ap.add_argument("--query", required=True, help="the pfr query tool (pfr pins)")
    ap.add_argument("test", choices=["oom", "signal", "pressure", "pin", "heap"])
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="pfr-triggers-%s-" % args.test)
    try:
        globals()["test_" + args.test](args, tmp)
    except Exception as e:  # a crash of the harness is a failure with its reason
        ri.FAILURES.append(repr(e))
        print("ERROR: %r" % e, flush=True)
    finally:
        ri.kill_all(ri.LIVE)
    return ri.verdict(tmp)


if __name__ == "__main__":
    sys.exit(main())
