#!/usr/bin/env python3
"""What pfr's Java profiles cost a JVM (issue 33; docs/java.md "What it costs",
docs/benchmarks.md "Java"): the throughput of PfrJavaThroughput (CPU, allocation and a shared
monitor in every operation) with pfr's Flight Recorder recording and without, in one run.

States, taken in turn within each round (each round starts one state later, so none always
follows the same one):
  on       pfr-recorder runs with java_profiler = enabled (the JVMs are attached and dumped each
           interval)
  reload   the same recorder, java_profiler = disabled by a SIGHUP reload (pfr's recording is
           stopped; the recorder's eBPF CPU profiler still samples the host)
  stopped  no recorder at all
Two ways of taking them: "same", the same JVMs through all states and rounds (JIT warm, Flight
Recorder's classes loaded once), and "fresh", new JVMs for each period (the first attach starts
the JVM's attach listener and Flight Recorder, which a fresh JVM pays for).

States "jfr-cpu", "jfr-cpu20", "jfr-alloc", "jfr-lock" and "jfr-all" tell where a cost goes: no
recorder, and the bench itself starts a recording (jcmd JFR.start) with that part of pfr's
settings (jfr-all: all of them, and no dumps; jfr-cpu20: execution samples at 20 ms).

A control JVM runs the same workload beside the bench's JVMs through every state; it is
started with -XX:+DisableAttachMechanism, so no recorder attaches it (nor any other recorder on
the host). It takes the same share of the host's noise as the bench's JVMs.

Per period, over its measured window (after the JVMs are recording, or the recording stopped,
and a warm-up): operations per second (all JVMs), the same over the control's, operations per
CPU-second of the JVMs (this counts the JVM's own Flight Recorder threads and the sampled
threads' time in the sampler: the JVM-side cost whatever share of the CPUs the host leaves), the
JVMs' CPU (s per minute, per JVM) and that of their Flight Recorder and attach threads, the
recorder's CPU (process and reaped children; its Java worker thread alone) and its resident
memory (the largest VmRSS seen). Prints medians per state, the cost against each other state
(1 - on/off of the medians, and the median of the per-round ratios, which is steadier when the
host's load drifts), and the recorder's figures per JVM. The host is shared: run it under nice,
with the JVMs and the recorder at the same nice value (they inherit it).

Usage: nice -n 10 bench_java.py --recorder BIN --jdk DIR --classes DIR [--jvms 1] [--threads 2]
         [--rounds 3] [--period 30] [--warmup 5] [--interval 10] [--mode same|fresh|both]
         [--states on,reload,stopped] [--settle 15]
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
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "recorder"))
from recorder_itest import free_port  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
LIVE = []


def log(msg):
    print("[bench_java] %s" % msg, flush=True)


def stat_fields(path):
    with open(path) as f:
        return f.read().rsplit(")", 1)[1].split()


def cpu_s(pid, children=False):
    """utime + stime of a process (all its threads), and with children those of its reaped
    children, seconds."""
    f = stat_fields("/proc/%d/stat" % pid)
    t = int(f[11]) + int(f[12])
    if children:
        t += int(f[13]) + int(f[14])
    return t / TICK


def task_cpu_s(pid, tid):
    f = stat_fields("/proc/%d/task/%d/stat" % (pid, tid))
    return (int(f[11]) + int(f[12])) / TICK


def threads_cpu_s(pid, names):
    """CPU of the threads of pid whose name starts with one of names, seconds."""
    t = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                comm = f.read().strip()
            if comm.startswith(names):
                f = stat_fields("/proc/%d/task/%s/stat" % (pid, tid))
                t += int(f[11]) + int(f[12])
        except OSError:
            pass
    return t / TICK


def has_thread(pid, prefix):
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                if f.read().startswith(prefix):
                    return True
        except OSError:
            pass
    return False


def rss_kib(pid, key="VmRSS:"):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    return 0


class Recorder:
    """One pfr-recorder whose java_profiler comes from its config file, so a SIGHUP turns it."""

    def __init__(self, args, tmp):
        self.args, self.tmp = args, tmp
        self.conf = os.path.join(tmp, "recorder.ini")
        self.proc = None
        self.starts = 0
        self.jfr = []  # JVMs running the bench's own recording (states jfr-*)

    def write_conf(self, java):
        with open(self.conf, "w") as f:
            f.write("[recorder]\njava_profiler = %s\n" % ("enabled" if java else "disabled"))

    def text(self):
        with open(self.logpath, errors="replace") as f:
            return f.read()

    def start(self, java):
        self.write_conf(java)
        self.starts += 1
        self.port = free_port()
        self.logpath = os.path.join(self.tmp, "recorder-%d.log" % self.starts)
        self.logf = open(self.logpath, "w")
        cmd = [self.args.recorder, "--store", os.path.join(self.tmp, "ring.db"),
               "--interval", str(self.args.interval), "--log-level", "debug",
               "--metrics-listen", "127.0.0.1:%d" % self.port]
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, PFR_CONFIG=self.conf))
        LIVE.append(self.proc)
        end = time.time() + 90
        while ": sampling with" not in self.text():
            if time.time() > end or self.proc.poll() is not None:
                sys.exit("the recorder did not start:\n" + self.text()[-3000:])
            time.sleep(0.2)

    def reload(self, java):
        self.write_conf(java)
        self.proc.send_signal(signal.SIGHUP)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=90)
        self.logf.close()
        self.proc = None

    def lines(self, pid, needle):
        head = "java: pid %d:" % pid
        return sum(1 for ln in self.text().splitlines() if head in ln and needle in ln)

    def worker_tid(self):
        for tid in os.listdir("/proc/%d/task" % self.proc.pid):
            with open("/proc/%d/task/%s/comm" % (self.proc.pid, tid)) as f:
                if f.read().strip() == "pfr-java":
                    return int(tid)
        return None

    def metric(self, name):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.port,
                                        timeout=5) as r:
                text = r.read().decode()
        except OSError:
            return None
        m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
        return float(m.group(1)) if m else None


class Jvm:
    def __init__(self, args, tmp, flags=()):
        self.tag = "pfr-java-bench-%d-%s" % (os.getpid(), os.urandom(3).hex())
        self.outpath = os.path.join(tmp, self.tag + ".out")
        self.out = open(self.outpath, "w")
        cmd = [os.path.join(args.jdk, "java")] + list(flags) + [
            "-cp", args.classes, "PfrJavaThroughput", str(args.threads), self.tag]
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT)
        LIVE.append(self.proc)
        self.pid = self.proc.pid

    def ops(self):
        """(monotonic ms, operations) of the workload's last line."""
        with open(self.outpath) as f:
            last = [ln for ln in f.read().splitlines() if ln.startswith("ops ")]
        if not last:
            return None
        _, ms, n = last[-1].split()
        return int(ms), int(n)

    def kill(self):
        self.proc.kill()
        self.proc.wait()
        self.out.close()


def wait_for(cond, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return
        time.sleep(0.2)
    sys.exit("no %s within %d s" % (what, timeout))


# Parts of pfr's recording settings (recorder/java/jfr_session.c), started by the bench itself
# with jcmd and no recorder running, to tell where a cost goes: states "jfr-<part>".
JFR_PARTS = {
    "cpu": ["jdk.ExecutionSample#enabled=true", "jdk.ExecutionSample#period=10ms"],
    "cpu20": ["jdk.ExecutionSample#enabled=true", "jdk.ExecutionSample#period=20ms"],
    "alloc": ["jdk.ObjectAllocationSample#enabled=true",
              "jdk.ObjectAllocationSample#throttle=150/s",
              "jdk.ObjectAllocationSample#stackTrace=true"],
    "lock": ["jdk.JavaMonitorEnter#enabled=true", "jdk.JavaMonitorEnter#threshold=1ms",
             "jdk.JavaMonitorEnter#stackTrace=true", "jdk.ThreadPark#enabled=true",
             "jdk.ThreadPark#threshold=1ms", "jdk.ThreadPark#stackTrace=true"],
}
JFR_PARTS["all"] = JFR_PARTS["cpu"] + JFR_PARTS["alloc"] + JFR_PARTS["lock"]


def jcmd(args, pid, *cmd):
    out = subprocess.run([os.path.join(args.jdk, "jcmd"), str(pid)] + list(cmd),
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        sys.exit("jcmd %d %s: %s%s" % (pid, " ".join(cmd), out.stdout, out.stderr))


def set_state(rec, state, jvms, args):
    """Take the recorder to state; for "on", wait until every JVM of the bench records."""
    for pid in rec.jfr:  # the bench's own recording of the state before
        jcmd(args, pid, "JFR.stop", "name=pfr-bench")
    rec.jfr = []
    if state.startswith("jfr-"):
        if rec.proc:
            rec.stop()
        for j in jvms:
            jcmd(args, j.pid, "JFR.start", "name=pfr-bench", "settings=none", "maxage=60s",
                 *["+" + x for x in JFR_PARTS[state[4:]]])
            rec.jfr.append(j.pid)
        return
    if state == "stopped":
        if rec.proc:
            rec.stop()
        return
    java = state == "on"
    base = {j.pid: rec.lines(j.pid, "recording, started") if rec.proc else 0 for j in jvms}
    if rec.proc:
        rec.reload(java)
    else:
        rec.start(java)
        time.sleep(args.settle)  # the recorder's own start (BPF, the first scan) passes
    if java:
        wait_for(lambda: all(rec.lines(j.pid, "recording, started") > base[j.pid] for j in jvms),
                 3 * args.interval + 30, "attach of every JVM")
    else:
        wait_for(lambda: all(rec.lines(j.pid, "recording stopped") >=
                             rec.lines(j.pid, "recording, started") for j in jvms),
                 30, "pfr's recordings stopped")


def control_jvm(args, tmp):
    """The control: the same workload in a JVM that refuses attach, so no recorder ever records
    it; it runs beside the bench's JVMs through every state and takes the same share of the
    host's noise, so the bench's throughput over the control's is steadier than either."""
    j = Jvm(args, tmp, ["-XX:+DisableAttachMechanism"])
    wait_for(lambda: j.ops(), 60, "the control JVM to start")
    return j


def measure(rec, jvms, control, seconds):
    """One window: the JVMs' throughput and CPU, the recorder's CPU and memory."""
    k0 = control.ops()
    o0 = [j.ops() for j in jvms]
    c0 = [cpu_s(j.pid) for j in jvms]
    f0 = [threads_cpu_s(j.pid, ("JFR", "Attach Listener")) for j in jvms]
    rp = rec.proc.pid if rec.proc else None
    wt = rec.worker_tid() if rp else None
    r0 = cpu_s(rp, children=True) if rp else 0
    w0 = task_cpu_s(rp, wt) if wt else 0
    t0 = time.time()
    rss = 0
    while time.time() - t0 < seconds:
        if rp:
            rss = max(rss, rss_kib(rp))
        time.sleep(1)
    wall = time.time() - t0
    o1 = [j.ops() for j in jvms]
    k1 = control.ops()
    ops_s = sum((b[1] - a[1]) / ((b[0] - a[0]) / 1000) for a, b in zip(o0, o1))
    jcpu = sum(cpu_s(j.pid) for j in jvms) - sum(c0)
    ops = sum(b[1] - a[1] for a, b in zip(o0, o1))
    jfr = sum(threads_cpu_s(j.pid, ("JFR", "Attach Listener")) for j in jvms) - sum(f0)
    ctl = (k1[1] - k0[1]) / ((k1[0] - k0[0]) / 1000)
    out = {"ops_s": ops_s, "rel": ops_s / ctl, "ops_cpu_s": ops / jcpu if jcpu else 0,
           "jvm_cpu_min": jcpu * 60 / wall / len(jvms), "jfr_cpu_min": jfr * 60 / wall / len(jvms),
           "rec_cpu_min": 0.0, "worker_cpu_min": 0.0, "rec_rss_mib": 0.0,
           "load": os.getloadavg()[0]}
    if rp:
        out["rec_cpu_min"] = (cpu_s(rp, children=True) - r0) * 60 / wall
        out["worker_cpu_min"] = (task_cpu_s(rp, wt) - w0) * 60 / wall if wt else 0.0
        out["rec_rss_mib"] = rss / 1024
        out["recording_jvms"] = rec.metric("pfr_java_recording_jvms") or 0
    return out


def show(label, r):
    log("%-8s %s ops/s %9.0f  /control %.3f  ops/cpu-s %9.0f  jvm %5.2f s/min (jfr+attach "
        "%5.3f)  recorder %5.3f s/min (java worker %5.3f)  rss %5.1f MiB  jvms recorded %s  "
        "load %.1f"
        % (label[0], label[1], r["ops_s"], r["rel"], r["ops_cpu_s"], r["jvm_cpu_min"],
           r["jfr_cpu_min"], r["rec_cpu_min"], r["worker_cpu_min"], r["rec_rss_mib"],
           int(r.get("recording_jvms", 0)), r["load"]))


def rounds_same(args, rec, tmp, states, control):
    jvms = [Jvm(args, tmp) for _ in range(args.jvms)]
    wait_for(lambda: all(j.ops() for j in jvms), 60, "the JVMs to start")
    time.sleep(10)  # JIT warm-up
    res = {s: [] for s in states}
    for r in range(args.rounds):
        for i in range(len(states)):
            s = states[(i + r) % len(states)]
            set_state(rec, s, jvms, args)
            time.sleep(args.warmup)
            m = measure(rec, jvms, control, args.period - args.warmup)
            show(("same", "r%d %-7s" % (r + 1, s)), m)
            res[s].append(m)
    set_state(rec, "stopped", jvms, args)
    for j in jvms:
        j.kill()
    return res


def rounds_fresh(args, rec, tmp, states, control):
    res = {s: [] for s in states}
    for r in range(args.rounds):
        for i in range(len(states)):
            s = states[(i + r) % len(states)]
            if s != "on" and not s.startswith("jfr-"):
                set_state(rec, s, [], args)
            jvms = [Jvm(args, tmp) for _ in range(args.jvms)]
            wait_for(lambda: all(j.ops() for j in jvms), 60, "the JVMs to start")
            if s == "on" or s.startswith("jfr-"):
                set_state(rec, s, jvms, args)  # the first attach of these JVMs
            else:
                time.sleep(3)  # about the time an attach takes, so the JIT is as warm
            time.sleep(args.warmup)
            m = measure(rec, jvms, control, args.period - args.warmup)
            show(("fresh", "r%d %-7s" % (r + 1, s)), m)
            if s in ("reload", "stopped") and any(has_thread(j.pid, "JFR Recorder")
                                                   for j in jvms):
                # another recorder on the host (another session's tests) attached a JVM
                # that this state keeps unrecorded: the period does not count
                log("fresh    r%d %s: a JVM was recorded by someone else; left out" % (r + 1, s))
                continue
            res[s].append(m)
            for j in jvms:
                j.kill()
            rec.jfr = []  # a jfr-* recording ended with its JVMs
    if rec.proc:
        rec.stop()
    return res


def summary(mode, res, args):
    n = min(len(v) for v in res.values())
    # as many periods of each state (a period left out shifts the per-round pairs after it)
    res = {s: v[:n] for s, v in res.items()}
    if n == 0:
        print("%s: no state has a period left" % mode)
        return
    med = {s: {k: statistics.median(m[k] for m in v) for k in v[0]} for s, v in res.items()}
    print("\n%s JVMs (%d x %d threads), %d rounds of %d s (measured %d s), interval %s s"
          % (mode, args.jvms, args.threads, args.rounds, args.period, args.period - args.warmup,
             args.interval))
    print("| state | ops/s (all JVMs) | over the control's | ops per JVM CPU-s | JVM CPU s/min "
          "(per JVM) | its JFR + attach threads s/min | recorder CPU s/min | its Java worker "
          "s/min | recorder RSS MiB | load |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s, m in med.items():
        print("| %s | %.0f | %.3f | %.0f | %.2f | %.3f | %.3f | %.3f | %.1f | %.1f |"
              % (s, m["ops_s"], m["rel"], m["ops_cpu_s"], m["jvm_cpu_min"], m["jfr_cpu_min"],
                 m["rec_cpu_min"], m["worker_cpu_min"], m["rec_rss_mib"], m["load"]))
    base = "stopped" if "stopped" in res else list(res)[-1]
    pairs = [(s, base) for s in res if s != base]
    if "on" in res and "reload" in res:
        pairs.insert(0, ("on", "reload"))
    for on, off in pairs:
        for k, what in (("rel", "ops/s over the control's"), ("ops_s", "ops/s"),
                        ("ops_cpu_s", "ops per JVM CPU-s")):
            cost = 100 * (1 - med[on][k] / med[off][k])
            paired = statistics.median(100 * (1 - a[k] / b[k])
                                       for a, b in zip(res[on], res[off]))
            print("cost of %-9s against %-7s (%s): %+.1f %% of the medians, per-round median "
                  "%+.1f %%" % (on, off, what, cost, paired))
    if "on" in med and "reload" in med:
        d = med["on"]["rec_rss_mib"] - med["reload"]["rec_rss_mib"]
        w = med["on"]["rec_cpu_min"] - med["reload"]["rec_cpu_min"]
        print("recorder per JVM (on - reload, / %d): CPU %.3f s/min, RSS %+.1f MiB; its Java "
              "worker %.3f s/min per JVM" % (args.jvms, w / args.jvms, d / args.jvms,
                                             med["on"]["worker_cpu_min"] / args.jvms))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--recorder", required=True)
    ap.add_argument("--jdk", required=True, help="the JDK's bin directory")
    ap.add_argument("--classes", required=True, help="PfrJavaThroughput.class's directory")
    ap.add_argument("--jvms", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--period", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--interval", type=int, default=10)
    ap.add_argument("--settle", type=int, default=15,
                    help="seconds left to a recorder just started before a period's warm-up")
    ap.add_argument("--mode", choices=("same", "fresh", "both"), default="both")
    ap.add_argument("--states", default="on,reload,stopped")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_java needs root (the recorder's eBPF and attach as the JVM's user)")
        return 77
    states = args.states.split(",")
    log("nice %d, load %.1f, %d CPUs; states %s" % (os.nice(0), os.getloadavg()[0],
                                                     os.cpu_count(), states))
    with tempfile.TemporaryDirectory(prefix="pfr-bench-java-") as tmp:
        rec = Recorder(args, tmp)
        try:
            control = control_jvm(args, tmp)
            if args.mode in ("same", "both"):
                summary("same", rounds_same(args, rec, tmp, states, control), args)
            if args.mode in ("fresh", "both"):
                summary("fresh", rounds_fresh(args, rec, tmp, states, control), args)
        finally:
            for p in LIVE:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
