#!/usr/bin/env python3
"""Busy-host benchmark (issue 30): pfr-recorder beside `perf record -g` and bpftrace while a
real build runs and a browser renders pages.

The load, started afresh for every round so that each round sees the same part of it:
  - a build of pfr itself: a `git archive` copy of the tree (HEAD of --source), configured as
    the release tree (gcc, RelWithDebInfo) and built with `make -j2`, again from scratch when it
    ends before the round does;
  - headless Chromium rendering generated pages (pages.py: an SVG icicle graph, a 4,000-row
    table, a script-heavy page) served by `python3 -m http.server`, one `chromium --headless
    --screenshot` per page, in a loop: a new browser (and its renderer, GPU and utility
    processes) every 2-3 s, a 200 MB stripped executable for every profiler to name.
Both run at nice 10 (the host is shared); --loads runs one of them alone, to tell which of them a
difference between profilers comes from (the targets are for both). The profilers, one per round,
rounds rotated (pfr, perf, bpftrace, then perf, bpftrace, pfr, ...):
  - pfr-recorder, default settings (an empty config file: not the host's), its own ring;
  - `perf record -F 99 -a -g` to a file;
  - `bpftrace -e 'profile:hz:99 { @[kstack, ustack, comm] = count(); }'` (as the other recorder
    benches, with its default limits: a map of 4,096 keys, so on a busy host the samples of
    stacks past it are not counted; it names its stacks at exit, the "stopping" time printed).
Per round: peak RSS (VmHWM; the sum over the processes of the profiler's cgroup), CPU seconds a
minute of the measured window after the warm-up (process from a cgroup v2 group of its own, as
bench_recorder.py, plus the run time of its BPF programs), and the share of sampled frames that
are named (all frames, and user frames alone), each sample's frames counted once per sample:
pfr from its ring (a frame is unnamed when `[unknown]` or `module+0xoffset`), perf from `perf
script` after the round (with the build's files still there), bpftrace from the map it prints at
exit (a frame is unnamed when a bare address). For pfr also how late its intervals were written:
the ring is read every --poll s (tests/recorder/store_dump --meta) from its start to its stop,
and an interval (its end time, per profile type) is late by between [the previous read's start,
the read that first shows it] less its end (for other sources than the CPU profiler, less the
interval end after it: a scraped profile ends when its response came, and is written with the
next interval); an interval is counted late when even the lower bound is over a second. perf's stack walks run in its sampling interrupts, which no CPU figure
of its process shows (bench_recorder.py measures them with spinners; a build leaves no such
clean workload), so its CPU figure here is a lower bound.

For pfr also the CPU of each of its threads (/proc/PID/task) and the run time of each of its BPF
programs (runs a second, ns a run, s/min) in the window, and its sampler's and unwinder's
metrics at the window's end (--pfr-arg passes it more arguments, --keep-logs keeps each round's
log: with --log-level debug, every unwind table built or read back).

Prints every round, then (when bpftrace ran beside pfr; perf is optional) one table of medians
(peak RSS also at its worst round), the CPU ratio to bpftrace's in the window and with the CPU
of bpftrace's stop (where it names its stacks) added, each round's ratios, and the verdict
against the targets: pfr's peak RSS <= 64 MiB in every round,
its CPU <= 1.5x bpftrace's (medians), no interval more than a second late. Exit 0 whatever the
verdict, 1 when a run broke, 77 when the host cannot run it.

Usage (as root): bench_busy_host.py --recorder BIN --dump BIN [--source DIR] [--rounds 2]
                     [--seconds 75] [--warmup 30] [--poll 0.25] [--tools pfr,perf,bpftrace]
                     [--perf-pfr] [--pfr-arg=ARG ...] [--keep-logs DIR]
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "recorder"), os.path.join(HERE, "..", "..", "recorder")]
import pages  # noqa: E402
import recorder_itest as ri  # noqa: E402
from bench_recorder import (Tool, forks, reap_cpu_s, tool_cpu_s,  # noqa: E402
                            unready_for, wait_for)
from bpfstats import CpuGroup, bpf_stats, loadavg, prog_run_ns, prog_stats, threads  # noqa: E402
BT = "profile:hz:99 { @[kstack, ustack, comm] = count(); }"
RSS_MIB, CPU_RATIO, LATE_S = 64, 1.5, 1.0  # the targets
CPU = ["ebpf:cpu:nanoseconds"]  # the type of the recorder's CPU chunks
INTERVAL_S = 10  # the recorder's default interval: its intervals end on multiples of it
UNNAMED_PFR = re.compile(r"\[unknown\]|.*\+0x[0-9a-f]+")
# pfr's metrics kept with each round: where its memory and CPU went
METRICS = ("pfr_memory_", "pfr_symbol_cache_", "pfr_unwind_", "pfr_frames_unresolved_total",
           "pfr_frames_late_total", "pfr_source_intervals_folded_total",
           "pfr_symbol_files_", "pfr_store_writer_", "pfr_cpu_samples_total",
           "pfr_cpu_stacks_walked_total", "pfr_store_page_cache_bytes", "pfr_store_chain_cache_bytes",
           "pfr_frame_cache_bytes",
           "pfr_symbol_dwarf_")


class Load:
    """The build and the browser, each a shell loop in a session of its own (stopped as a
    whole), at nice 10."""

    def __init__(self, args, tmp):
        self.tmp = tmp
        self.loads = args.loads
        self.src = os.path.join(tmp, "src")
        os.mkdir(self.src)
        tar = subprocess.run(["git", "-C", args.source, "archive", "--format=tar", "HEAD"],
                             check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", self.src], input=tar, check=True)
        site = os.path.join(tmp, "site")
        os.mkdir(site)
        port = ri.free_port()
        self.urls = ["http://127.0.0.1:%d/%s" % (port, p) for p in pages.write_pages(site)]
        self.server = subprocess.Popen(
            [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory", site,
             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs = []
        # all of the load in a cgroup of its own: its CPU, and a stop that reaches every process
        # (`timeout` and Chromium make process groups of their own)
        self.group = CpuGroup("pfr-bench-busy-load")

    def _loop(self, name, script):
        log = open(os.path.join(self.tmp, name + ".log"), "w")
        p = subprocess.Popen(["nice", "-n", "10", "bash", "-c", script], stdout=log,
                             stderr=subprocess.STDOUT, start_new_session=True, cwd=self.tmp,
                             preexec_fn=self.group.join)
        self.procs.append((p, log))

    def cpu_s(self):
        return self.group.usage_s() or 0.0

    def start(self):
        for name in ("build", "browser"):  # a load left out still has its (empty) log
            open(os.path.join(self.tmp, name + ".log"), "w").close()
        if "build" in self.loads:
            self._start_build()
        if "browser" in self.loads:
            self._start_browser()

    def _start_build(self):
        b = os.path.join(self.tmp, "build")
        self._loop("build", 'while :; do rm -rf "%s"; cmake -S "%s" -B "%s" -DCMAKE_C_COMPILER=gcc'
                   ' -DCMAKE_BUILD_TYPE=RelWithDebInfo && make -C "%s" -j2; echo "BUILD ENDED $?";'
                   ' done' % (b, self.src, b, b))

    def _start_browser(self):
        ud = os.path.join(self.tmp, "chromium")
        self._loop("browser", 'while :; do for u in %s; do timeout 60 chromium --headless'
                   ' --no-sandbox --disable-gpu --user-data-dir="%s" --window-size=1280,2000'
                   ' --virtual-time-budget=3000 --screenshot="%s/shot.png" "$u" >/dev/null 2>&1;'
                   ' echo "PAGE $?"; done; done' % (" ".join(self.urls), ud, self.tmp))

    def stop(self):
        """Stops both loops; returns what they did: builds ended, the build's last progress
        (make's percentage) and pages rendered."""
        killed = self.group.kill()
        for p, log in self.procs:
            if not killed:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            log.close()
        self.procs = []
        with open(os.path.join(self.tmp, "build.log"), errors="replace") as f:
            build = f.read()
        with open(os.path.join(self.tmp, "browser.log"), errors="replace") as f:
            browser = f.read()
        pct = re.findall(r"^\[ *(\d+)%\]", build, re.M)
        return {"builds": build.count("BUILD ENDED 0"), "build_pct": int(pct[-1]) if pct else 0,
                "pages": browser.count("PAGE 0"),
                "pages_failed": sorted(set(re.findall(r"PAGE ([1-9]\d*)", browser)))}

    def close(self):
        self.server.kill()
        self.server.wait()
        self.group.close()


class Lateness:
    """Reads pfr's ring every poll s on a thread of its own: when each interval (end time, per
    profile type) was first seen written."""

    def __init__(self, args, store):
        self.args, self.store = args, store
        self.seen = {}  # (types, end_ns) -> (lower bound, upper bound) of its write time
        self.reads = self.failed = 0
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _run(self):
        before = None  # the start of the previous read that succeeded
        while not self.halt.is_set():
            t0 = time.time()
            try:
                metas = ri.dump(self.args, self.store, "--meta") if os.path.exists(
                    self.store) else []
            except subprocess.CalledProcessError:
                self.failed += 1
                metas = None
            t1 = time.time()
            if metas is not None:
                self.reads += 1
                for m in metas:
                    key = (tuple(m["types"]), m["end_ns"])
                    if key not in self.seen:
                        # already there at the first read: written at an unknown time
                        self.seen[key] = (before, t1) if before is not None else None
                before = t0
            self.halt.wait(self.args.poll)

    def stop(self):
        """Stops reading; returns the intervals' lateness bounds in s, their source (cpu,
        goheap...) and end, (lo, hi, source, end_ns) each, oldest first."""
        self.halt.set()
        self.thread.join()
        out = []
        for (types, end), b in sorted(self.seen.items(), key=lambda kv: kv[0][1]):
            if b:
                due = end / 1e9 if list(types) == CPU else due_after(end)
                out.append((b[0] - due, b[1] - due, types[-1].split(":")[1], end))
        return out


def due_after(end_ns):
    """When the recorder writes a chunk of another source than its CPU profiler: at the first
    interval end after the chunk's end (a scraped profile ends when its response came, a Go heap
    walk when it was done; each source's chunks wait for the next interval to be written)."""
    return -(-end_ns // (INTERVAL_S * 10**9)) * INTERVAL_S


def frame_shares(samples):
    """samples: (weight, [(kernel?, named?) per frame]); the named shares of all frames and of
    user frames, weighted by the samples' weights."""
    tot = named = utot = unamed = 0
    for w, frames in samples:
        for kernel, ok in frames:
            tot += w
            named += w * ok
            if not kernel:
                utot += w
                unamed += w * ok
    return {"named": named / tot if tot else 0, "user_named": unamed / utot if utot else 0,
            "samples": sum(w for w, _ in samples)}


def pfr_samples(args, store):
    out = []
    for c in ri.dump(args, store, "--samples"):
        if c["types"] != CPU:
            continue
        for s in c["samples"]:
            out.append((s["value"] // c["period"],
                        [(f["module"] == "[kernel]", not UNNAMED_PFR.fullmatch(f["function"]))
                         for f in s["frames"]]))
    return out


def perf_samples(data):
    """perf script's stacks: a sample starts at a line without indentation, its frames are
    `ip sym (dso)`."""
    text = subprocess.run(["perf", "script", "-i", data, "-F", "comm,ip,sym,dso"],
                          capture_output=True, text=True, errors="replace", check=True,
                          timeout=1800).stdout
    out, cur = [], None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            cur = []
            out.append((1, cur))
            continue
        rest = line.strip().split(None, 1)[1] if len(line.split()) > 1 else "[unknown]"
        sym, _, dso = rest.rpartition(" (")
        if cur is not None:
            cur.append((dso.startswith(("[kernel", "[bpf")), sym != "[unknown]"))
    return out


def bpftrace_samples(path):
    """The map bpftrace printed at exit: `@[` kstack `,` ustack `, comm]: count` (stacks one
    frame a line, a bare address when unnamed). Also the stacks it failed to look up."""
    with open(path, errors="replace") as f:
        text = f.read()
    out = []
    for key, count in re.findall(r"^@\[(.*?)\]: (\d+)$", text, re.M | re.S):
        part, frames = 0, []  # part 0: kstack, 1: ustack, 2: comm; a line `,...` ends one
        for line in key.split("\n"):
            if line.lstrip().startswith(","):
                part += 1
            elif line.strip() and part < 2:
                frames.append((part == 0, not re.fullmatch(r"0x[0-9a-f]+", line.strip())))
        out.append((int(count), frames))
    return out, text.count("failed to look up stack id")


def group_vm_hwm_kib(group, pid):
    """Peak RSS of the profiler: the sum of the VmHWM of every process in its cgroup (its main
    process alone without one)."""
    pids = [pid]
    if group.path:
        with open(os.path.join(group.path, "cgroup.procs")) as f:
            pids = [int(x) for x in f.read().split()]
    return sum(ri.proc_status_kib(p, "VmHWM") for p in pids)


def pfr_metrics(port):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
            text = r.read().decode()
    except OSError as e:
        return ["(metrics not read: %s)" % e]
    return [ln for ln in text.splitlines() if ln.startswith(METRICS)]


def thread_cpu_s(pid):
    """CPU seconds of each thread of process pid by thread name (bpfstats.threads)."""
    out = {}
    for _, name, ns, _ in threads(pid):
        out[name] = out.get(name, 0) + ns / 1e9
    return out


def rss_by_mapping(pid, top=8):
    """Where a process's resident memory is (/proc/PID/smaps): KiB by mapping name (a file,
    [heap], [anon] for the nameless), the largest first."""
    by, name = {}, None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and not head[0].endswith(":"):
                name = head[5] if len(head) > 5 else "[anon]"
            elif head[0] == "Rss:":
                by[name] = by.get(name, 0) + int(head[1])
    return sorted(by.items(), key=lambda kv: -kv[1])[:top]


def prog_figures(before, after, dt):
    """Each BPF program's runs a second, ns a run and s/min over the window (named by bpftool,
    asked after the window: a new process inside it is work for the profiler measured)."""
    names = {}
    out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True)
    for p in json.loads(out.stdout or "[]"):
        names[p["id"]] = p.get("name", "?")
    figs = []
    for pid, (_, ns1, cnt1) in after.items():
        _, ns0, cnt0 = before.get(pid, (0, 0, 0))
        runs, ns = cnt1 - cnt0, ns1 - ns0
        if runs:
            figs.append((names.get(pid, str(pid)), runs / dt, ns / runs, ns / 1e9 / dt * 60))
    return sorted(figs, key=lambda f: -f[3])


def perf_self(pid, data):
    """`perf record -g` of process pid into data, for --perf-pfr."""
    return subprocess.Popen(["perf", "record", "-q", "-F", "499", "-g", "-p", str(pid), "-o",
                             data], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def perf_self_report(perf, data):
    perf.send_signal(signal.SIGINT)
    perf.wait()
    out = subprocess.run(["perf", "report", "--stdio", "-i", data, "--no-children", "-g", "none",
                          "--sort", "comm,dso,sym", "--percent-limit", "1"],
                         capture_output=True, text=True, errors="replace", timeout=600).stdout
    return [ln for ln in out.splitlines() if ln.strip() and not ln.startswith("#")][:40]


def make_tools(args, tmp):
    port = ri.free_port()
    pfr = Tool("pfr-recorder", [args.recorder, "--store", os.path.join(tmp, "ring.db"),
                                "--metrics-listen", "127.0.0.1:%d" % port], ": sampling with",
               signal.SIGTERM)
    pfr.port = port
    return [pfr,
            Tool("perf record", ["perf", "record", "-F", "99", "-a", "-g", "-q", "-o",
                                 os.path.join(tmp, "perf.data")], None, signal.SIGINT),
            Tool("bpftrace", ["bpftrace", "-e", BT], "Attaching", signal.SIGINT)]


def run_round(tool, args, tmp, load):
    for f in os.listdir(tmp):  # the previous round's ring, perf.data, log
        if f.startswith(("ring.db", "perf.data", "tool.log")):
            os.unlink(os.path.join(tmp, f))
    log = os.path.join(tmp, "tool.log")
    env = dict(os.environ, PFR_CONFIG=ri.empty_config(tmp))
    group = CpuGroup("pfr-bench-busy-" + tool.name.replace(" ", "-"))
    load.start()
    proc, late, m = None, None, {}
    try:
        with open(log, "w") as lf:
            proc = subprocess.Popen(tool.argv + (args.pfr_arg if tool.name == "pfr-recorder" else []), stdout=lf, stderr=subprocess.STDOUT, env=env,
                                    preexec_fn=group.join)
        if tool.ready and not wait_for(log, tool.ready, 120, proc):
            raise RuntimeError("%s did not start: %s" % (tool.name, open(log).read()[-2000:]))
        store = os.path.join(tmp, "ring.db")
        if tool.name == "pfr-recorder":
            late = Lateness(args, store)
        time.sleep(args.warmup)
        t0, f0, cpu0, bpf0 = time.time(), forks(), tool_cpu_s(group, proc), prog_run_ns(proc.pid)
        load0, th0, progs0 = load.cpu_s(), thread_cpu_s(proc.pid), prog_stats(proc.pid)
        selfp = perf_self(proc.pid, os.path.join(tmp, "perf.data.self")) if late and \
            args.perf_pfr else None
        time.sleep(args.seconds)
        t1, f1, cpu1, bpf1 = time.time(), forks(), tool_cpu_s(group, proc), prog_run_ns(proc.pid)
        load1, th1, progs1 = load.cpu_s(), thread_cpu_s(proc.pid), prog_stats(proc.pid)
        m["threads"] = {k: (v - th0.get(k, 0)) / (t1 - t0) * 60 for k, v in th1.items()}
        m["progs"] = prog_figures(progs0, progs1, t1 - t0)
        if selfp:
            m["perf_self"] = perf_self_report(selfp, os.path.join(tmp, "perf.data.self"))
        m["rss_mib"] = group_vm_hwm_kib(group, proc.pid) / 1024
        if late:
            m["rss_maps"] = rss_by_mapping(proc.pid)
            m["metrics"] = pfr_metrics(tool.port)
            m["late"] = late.stop()  # before the stop: the interval cut short at exit is not one
            m["late_reads"], m["late_failed"] = late.reads, late.failed
        # bpftrace names its stacks only now, at exit: minutes on a busy host, outside the window
        # but reported (stop_s, stop_cpu_s)
        ts = time.time()
        proc.send_signal(tool.stop_sig)
        life_cpu = reap_cpu_s(proc, 1800)
        m["stop_s"] = time.time() - ts
        m["stop_cpu_s"] = (group.usage_s() if group.path else life_cpu) - cpu1
        # perf ends itself by the signal it was stopped with, once its file is written
        status = os.waitstatus_to_exitcode(proc.returncode)
        if status not in (0, -tool.stop_sig):
            raise RuntimeError("%s exited with status %d: %s" % (
                tool.name, status, open(log, errors="replace").read()[-2000:]))
    finally:
        if late and late.thread.is_alive():
            late.stop()
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        group.close()
        if args.keep_logs and os.path.exists(log):
            os.makedirs(args.keep_logs, exist_ok=True)
            shutil.copy(log, os.path.join(args.keep_logs, "%s-%d.log" % (
                tool.name.replace(" ", "-"), int(time.time()))))
        m["load"] = load.stop()
    dt = t1 - t0
    m["cpu_per_min"] = (cpu1 - cpu0) / dt * 60
    m["bpf_per_min"] = sum(bpf1.get(k, 0) - v for k, v in bpf0.items()) / 1e9 / dt * 60
    m["total_per_min"] = m["cpu_per_min"] + m["bpf_per_min"]
    m["forks_per_s"], m["loadavg"] = (f1 - f0) / dt, loadavg()
    m["load_cpu_per_min"] = (load1 - load0) / dt * 60
    m["lost_stacks"] = 0
    if tool.name == "pfr-recorder":
        samples = pfr_samples(args, store)
    elif tool.name == "perf record":
        samples = perf_samples(os.path.join(tmp, "perf.data"))
    else:
        samples, m["lost_stacks"] = bpftrace_samples(log)
    m.update(frame_shares(samples))
    return m


def print_round(r, name, m):
    ld = m["load"]
    late = ""
    if "late" in m:
        lo = max((x[0] for x in m["late"]), default=0)
        hi = max((x[1] for x in m["late"]), default=0)
        late = "  intervals %d, late by at most %.2f-%.2f s, %d over %.0f s (%d reads, %d failed)" \
            % (len(m["late"]), lo, hi, sum(x[0] > LATE_S for x in m["late"]), LATE_S,
               m["late_reads"], m["late_failed"])
        late += "\n    intervals (source: late by at least, s): " + ", ".join(
            "%s %.2f" % (x[2], x[0]) for x in m["late"])
    print("round %d %-12s rss %.1f MiB  cpu %.3f + bpf %.3f = %.3f s/min  frames named %.1f %% "
          "(user %.1f %%) of %d samples%s%s\n    load: %d builds ended, build at %d %%, %d pages "
          "(failed: %s), %.1f CPU s/min; host %.0f new processes/s, load avg %.1f"
          % (r, name, m["rss_mib"], m["cpu_per_min"], m["bpf_per_min"], m["total_per_min"],
             100 * m["named"], 100 * m["user_named"], m["samples"],
             ", %d stacks bpftrace failed to look up" % m["lost_stacks"] if m["lost_stacks"]
             else "", late, ld["builds"], ld["build_pct"], ld["pages"],
             ", ".join(ld["pages_failed"]) or "none", m["load_cpu_per_min"], m["forks_per_s"],
             m["loadavg"]), flush=True)
    print("    stopping took %.1f s, %.2f CPU s" % (m["stop_s"], m["stop_cpu_s"]))
    threads = ", ".join("%s %.3f" % kv for kv in sorted(m["threads"].items(),
                                                         key=lambda kv: -kv[1]) if kv[1])
    if threads:
        print("    threads, CPU s/min: " + threads)
    if m.get("progs"):
        print("    BPF programs (runs/s, ns/run, s/min): " + ", ".join(
            "%s %.1f/s %.0f ns %.3f" % f for f in m["progs"]))
    if "rss_maps" in m:
        print("    resident KiB by mapping: " + ", ".join("%s %d" % (os.path.basename(k), v)
                                                        for k, v in m["rss_maps"]))
    for line in m.get("metrics", []) + m.get("perf_self", []):
        print("    " + line)


def report(res, args):
    # with the stop: bpftrace names its stacks only at exit, so its profile of the window costs
    # the window's CPU and the stop's; pfr's and perf's stops write little
    for ms in res.values():
        for m in ms:
            m["life_per_min"] = m["total_per_min"] + m["stop_cpu_s"] * 60 / args.seconds
    med = {name: {k: statistics.median(m[k] for m in ms)
                  for k in ("rss_mib", "cpu_per_min", "bpf_per_min", "total_per_min", "named",
                            "user_named", "forks_per_s", "life_per_min")}
           for name, ms in res.items()}
    bt_life = med["bpftrace"]["life_per_min"]
    bt = med["bpftrace"]["total_per_min"]
    p = med["pfr-recorder"]
    lates = [x for m in res["pfr-recorder"] for x in m["late"]]
    worst_lo = max((x[0] for x in lates), default=0)
    worst_hi = max((x[1] for x in lates), default=0)
    n_late = sum(x[0] > LATE_S for x in lates)
    worst_rss = max(m["rss_mib"] for m in res["pfr-recorder"])
    print()
    loads = {"build": "pfr's build at -j2", "browser": "headless Chromium"}
    print("Busy host: %s, %d CPUs, %d rounds x %.0f s (after %.0f s of warm-up) per profiler,"
          " medians" % (" + ".join(loads[x] for x in args.loads), os.cpu_count(), args.rounds,
                        args.seconds, args.warmup))
    print("| profiler | peak RSS MiB (worst round) | CPU s/min: process + BPF = total |"
          " ÷ bpftrace | with its stop, s/min (÷ bpftrace) |"
          " intervals late > 1 s (worst, s) | frames named (user frames) |"
          " host new processes/s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, m in med.items():
        worst = max(x["rss_mib"] for x in res[name])
        late = ("%d of %d (%.2f-%.2f)" % (n_late, len(lates), worst_lo, worst_hi)
                if name == "pfr-recorder" else "—")
        print("| %s | %.1f (%.1f) | %.3f + %.3f = %.3f | %.2f | %.3f (%.2f) | %s |"
              " %.1f %% (%.1f %%) | %.0f |"
              % (name, m["rss_mib"], worst, m["cpu_per_min"], m["bpf_per_min"],
                 m["total_per_min"], m["total_per_min"] / bt if bt else 0,
                 m["life_per_min"], m["life_per_min"] / bt_life if bt_life else 0, late,
                 100 * m["named"], 100 * m["user_named"], m["forks_per_s"]))
    print("(perf's stack walks run in its sampling interrupts, outside these figures; the"
          " lateness is bounded by the ring's reads, %.2f s apart)" % args.poll)
    # what user space can win at most: pfr's BPF programs alone against bpftrace's whole
    print("pfr's BPF programs alone: %.3f s/min, %.2fx bpftrace's process + BPF in the window"
          % (p["bpf_per_min"], p["bpf_per_min"] / bt if bt else float("inf")))
    # the host's load differs from round to round more than the profilers do: each round's ratio
    for r, (pm, bm) in enumerate(zip(res["pfr-recorder"], res["bpftrace"])):
        print("round %d: pfr %.3f s/min, bpftrace %.3f in the window (%.2fx), %.3f with its stop"
              " (%.2fx)" % (r + 1, pm["total_per_min"], bm["total_per_min"],
                           pm["total_per_min"] / bm["total_per_min"] if bm["total_per_min"]
                           else float("inf"), bm["life_per_min"],
                           pm["life_per_min"] / bm["life_per_min"] if bm["life_per_min"]
                           else float("inf")))
    verdicts = [
        ("peak RSS <= %d MiB in every round" % RSS_MIB, worst_rss <= RSS_MIB,
         "worst %.1f MiB" % worst_rss),
        ("CPU <= %.1fx bpftrace's" % CPU_RATIO, p["total_per_min"] <= CPU_RATIO * bt,
         "%.2fx" % (p["total_per_min"] / bt if bt else float("inf"))),
        ("CPU with the stop that delivers the profile <= %.1fx bpftrace's" % CPU_RATIO,
         p["life_per_min"] <= CPU_RATIO * bt_life,
         "%.2fx" % (p["life_per_min"] / bt_life if bt_life else float("inf"))),
        ("no interval more than %.0f s late" % LATE_S, n_late == 0,
         "%d late, worst %.2f-%.2f s" % (n_late, worst_lo, worst_hi)),
    ]
    for what, ok, fig in verdicts:
        print("target %s: %s (%s)" % (what, "PASS" if ok else "FAIL", fig))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recorder", required=True)
    ap.add_argument("--dump", required=True, help="tests/recorder/recorder_store_dump")
    ap.add_argument("--source", default=os.path.join(HERE, "..", "..", ".."),
                    help="the git tree whose HEAD is built as the load (default: this one)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=75)
    ap.add_argument("--warmup", type=float, default=30)
    ap.add_argument("--poll", type=float, default=0.25)
    ap.add_argument("--tools", default="pfr,perf,bpftrace", type=lambda v: v.split(","),
                    help="the profilers to run (a diagnosis of one; the table wants all three)")
    ap.add_argument("--perf-pfr", action="store_true",
                    help="in pfr's rounds, `perf record -g -p` of the recorder in the measured"
                    " window, its top symbols printed (adds perf's cost to pfr's figures)")
    ap.add_argument("--pfr-arg", action="append", default=[],
                    help="one more argument for pfr-recorder (repeat: --pfr-arg=--log-level"
                    " --pfr-arg=debug)")
    ap.add_argument("--loads", default="build,browser", type=lambda v: v.split(","),
                    help="the loads to run: build, browser or both (the default; the targets are"
                    " for both): one alone says which of them a difference comes from")
    ap.add_argument("--keep-logs", help="copy each round's profiler log into this directory")
    args = ap.parse_args()
    if not args.loads or set(args.loads) - {"build", "browser"}:
        ap.error("--loads: build, browser or build,browser")
    why = unready_for(("perf", "bpftrace", "chromium", "cmake", "make", "git"))
    if why:
        print("SKIP: " + why)
        return 77
    tmp = tempfile.mkdtemp(prefix="pfr-bench-busy-")
    tools = [t for t in make_tools(args, tmp) if t.name.split()[0].split("-")[0] in args.tools]
    res = {t.name: [] for t in tools}
    load = None
    try:
        load = Load(args, tmp)
        with bpf_stats():
            for r in range(args.rounds):
                # each round starts one profiler later, as bench_recorder.py
                for t in tools[r % len(tools):] + tools[:r % len(tools)]:
                    m = run_round(t, args, tmp, load)
                    res[t.name].append(m)
                    print_round(r + 1, t.name, m)
    except (RuntimeError, subprocess.SubprocessError, OSError) as e:
        print("broken run: %s" % e)
        return 1
    finally:
        if load:
            load.close()
        shutil.rmtree(tmp, ignore_errors=True)
    if {"pfr-recorder", "bpftrace"} <= set(res):  # the targets are against bpftrace
        report(res, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
