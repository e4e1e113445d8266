#!/usr/bin/env python3
"""Integration tests of pfr-recorder: the real daemon, real processes, the ring read back.

Usage: recorder_itest.py --recorder BIN --dump BIN --workloads DIR [--pfr BIN] [--sanitized] TEST
TEST is one of: profiles, stress, signals, config, goheap, scrape, metrics, pins (needs --pfr).
Exit 0 = pass, 1 = fail, 77 = skipped.
"""
import argparse
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

FAILURES = []


def check(cond, msg):
    if not cond:
        FAILURES.append(msg)
        print("FAIL: " + msg, flush=True)
    return cond


def log(msg):
    print(msg, flush=True)


# Every recorder started: main() kills those a failed test left running (a whole-host profiler
# must not outlive its test and skew what runs next).
LIVE = []


def empty_config(tmp):
    """An empty config file: a test's recorder takes its settings from the test alone."""
    path = os.path.join(tmp, "empty.ini")
    open(path, "w").close()
    return path


def proc_status_kib(pid, key):
    """A KiB figure of /proc/PID/status (VmRSS, VmHWM), 0 when the process is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def kill_all(procs):
    """Kill and reap what is still running, in the order given."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


class Recorder:
    """A pfr-recorder process writing to a store in a temp dir."""

    def __init__(self, args, tmp, extra, env=None):
        self.store = os.path.join(tmp, "ring.db")
        self.logpath = os.path.join(tmp, "recorder.log")
        self.logf = open(self.logpath, "w")
        cmd = [args.recorder, "--store", self.store] + extra
        e = dict(os.environ)
        if env:
            e.update(env)
        if "--config" not in extra and "PFR_CONFIG" not in e:
            e["PFR_CONFIG"] = empty_config(tmp)  # not the host's /etc/pfr/recorder.ini
        log("starting: " + " ".join(cmd))
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT, env=e)
        LIVE.append(self.proc)
        # main.c's line once the ring is open; not "cpu: sampling N CPUs", logged before it
        self.wait_log(": sampling with", 30)

    def log_text(self):
        with open(self.logpath) as f:
            return f.read()

    def wait_log(self, needle, timeout):
        end = time.time() + timeout
        while time.time() < end:
            if needle in self.log_text():
                return True
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError("recorder did not log %r; log:\n%s" % (needle, self.log_text()))

    def rss_kib(self):
        return proc_status_kib(self.proc.pid, "VmRSS")

    def stop(self, sig=signal.SIGTERM, timeout=30):
        t = time.time()
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=timeout)
        self.logf.close()
        return rc, time.time() - t, t


def dump(args, store, mode="--samples", narrow=()):
    """The ring's chunks (store_dump); narrow: its --service/--type options."""
    out = subprocess.run([args.dump, store, mode, *narrow], check=True, capture_output=True,
                         text=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def newest_cpu_end(args, store):
    """The end (seconds) of the newest CPU interval in the ring, or None when the ring cannot
    tell at this moment (the dump failed, or no CPU interval yet): said in the log."""
    try:
        ends = [c["end_ns"] for c in dump(args, store, "--meta")
                if c["types"] == ["ebpf:cpu:nanoseconds"]]
    except subprocess.CalledProcessError as e:
        log("the ring could not be read: %s" % (e.stderr or "").strip()[:200])
        return None
    return max(ends) / 1e9 if ends else None


def lateness(args, store, interval, seconds, watch=None):
    """Look at the ring every 0.25 s for seconds: how late the newest CPU interval was at worst
    (its age at a look, less an interval), and how many looks could tell. watch() runs at each
    look. The intervals before the looks began count as if one had ended then: an interval
    without a CPU sample writes no chunk, and an idle host before the test's workload started
    is not a late recorder (one that writes nothing from then on is)."""
    worst, looks, told = 0.0, 0, 0
    t0 = time.time()
    end = t0 + seconds
    while time.time() < end:
        t = time.time()
        newest = newest_cpu_end(args, store)
        looks += 1
        if newest is not None:
            told += 1
            worst = max(worst, t - max(newest, t0 - interval) - interval)
        if watch:
            watch()
        time.sleep(0.25)
    check(told >= looks // 2, "only %d of %d looks could read the ring" % (told, looks))
    return worst, told


def host_id():
    try:
        with open("/etc/machine-id") as f:
            return f.read().strip()
    except OSError:
        return ""


def check_chunk_common(chunks, hz):
    period = 1000000000 // hz
    hid = host_id()
    for c in chunks:
        check(c["types"] == ["ebpf:cpu:nanoseconds"], "chunk types %r" % c["types"])
        check(c["type"] == "ebpf:cpu:nanoseconds" and c["unit"] == "nanoseconds",
              "sample type %s/%s" % (c["type"], c["unit"]))
        check(c["period"] == period and c["period_type"] == "cpu" and
              c["period_unit"] == "nanoseconds",
              "period %s %s/%s" % (c["period"], c["period_type"], c["period_unit"]))
        check(c["time_nanos"] == c["start_ns"] and
              c["duration_nanos"] == c["end_ns"] - c["start_ns"],
              "profile time %d+%d vs chunk [%d, %d)" % (c["time_nanos"], c["duration_nanos"],
                                                        c["start_ns"], c["end_ns"]))
        check(c["labels"].get("host.name") == socket.gethostname(),
              "host.name label %r" % c["labels"].get("host.name"))
        if hid:
            check(c["labels"].get("host.id") == hid, "host.id label %r" % c["labels"].get("host.id"))
        for s in c["samples"]:
            if s["value"] % period != 0 or s["value"] <= 0:
                check(False, "sample value %d not a multiple of the period" % s["value"])
                break
            if s["pid"] <= 0 or not s["comm"] or not s["frames"]:
                check(False, "sample without pid/comm/frames: %r" % s)
                break


def samples_of(chunks, service):
    return [s for c in chunks if c["service"] == service for s in c["samples"]]


def names(s):
    return [f["function"] for f in s["frames"]]


def split_ratio(samples, heavy, light):
    """Share of samples under heavy among those under heavy or light (by frame name match)."""
    h = l = 0
    for s in samples:
        fs = names(s)
        if any(heavy in f for f in fs):
            h += s["value"]
        elif any(light in f for f in fs):
            l += s["value"]
    return (h / (h + l) if h + l else 0.0), h + l


def run_workloads(args, specs):
    procs = []
    for name, argv in specs:
        procs.append((name, subprocess.Popen([os.path.join(args.workloads, argv[0])] + argv[1:])))
    return procs


# ---------------------------------------------------------------------------------------------


def wait_for_samples(args, store, services, hz, want, limit):
    """Poll the ring until every service has want samples or limit seconds passed (a loaded
    machine gives the workloads less CPU: they then run longer)."""
    period = 1000000000 // hz
    end = time.time() + limit
    counts = {}
    while time.time() < end:
        counts = dict.fromkeys(services, 0)
        for c in dump(args, store, "--meta"):
            if c["service"] in counts:
                counts[c["service"]] += c.get("total", 0) // period
        if all(v >= want for v in counts.values()):
            break
        time.sleep(1)
    log("samples per workload: %r" % counts)
    return counts


def test_profiles(args, tmp):
    # a high rate so each of the concurrent workloads gets enough samples for +-5 points
    hz = 997
    # names are what this test checks: no symbolizing budget and a symbol cache large enough for
    # whatever else runs on the machine (a loaded machine, a sanitizer build). CPU chunks only:
    # any Go program on the host with heap sampling on would add its heap chunks (one did, on a
    # machine shared with other builds)
    rec = Recorder(args, tmp, ["--interval", "2", "--cpu-hz", str(hz), "--log-level", "debug",
                               "--symbolize-budget", "600", "--sym-cache-bytes", "512M",
                               "--go-heap-profiler", "disabled", "--scrape-local", "off"])
    secs = "120"  # stopped once they have enough samples
    variants = [("pfr-calltree-pie", ["pfr-calltree-pie", secs]),
                ("pfr-calltree-nopie", ["pfr-calltree-nopie", secs]),
                ("pfr-calltree-shared", ["pfr-calltree-shared", secs]),
                ("pfr-calltree-stripped", ["pfr-calltree-stripped", secs]),
                ("pfr-syscalls", ["pfr-syscalls", secs])]
    for opt in ("pfr-calltree-cpp", "pfr-calltree-go"):
        # the build requires g++ and Go for the tests: a missing workload is a failure
        check(os.path.exists(os.path.join(args.workloads, opt)), "%s not built" % opt)
        variants.append((opt, [opt, secs]))
    procs = run_workloads(args, variants)
    # the host may run other programs of these names (another checkout's tests): only the
    # processes started here count
    pid_of = {name: p.pid for name, p in procs}

    def ours(svc):
        return [s for s in samples_of(chunks, svc) if s["pid"] == pid_of[svc]]

    # 1200 samples: the standard error of a 75/25 split is 1.25 points
    wait_for_samples(args, rec.store, [v[0] for v in variants], hz, 1200, 45)
    for _, p in procs:
        p.kill()
        p.wait()
    # short-lived processes, once the machine is quieter and the daemon has caught up (a
    # sanitizer build may lag behind after symbolizing the workloads): 50 ms each
    killed_ns = time.time_ns()
    end = time.time() + 90
    while time.time() < end and not any(c["end_ns"] > killed_ns for c in dump(args, rec.store, "--meta")):
        time.sleep(0.5)
    short_pids = []
    for _ in range(5):
        p = subprocess.Popen([os.path.join(args.workloads, "pfr-short-lived"), "50"])
        short_pids.append(p.pid)
        p.wait()
        time.sleep(0.3)
    time.sleep(0.5)
    rc, took, term_at = rec.stop()
    check(rc == 0, "recorder exit code %d after SIGTERM" % rc)
    chunks = dump(args, rec.store)
    check(len(chunks) > 0, "no chunks in the store")
    check_chunk_common(chunks, hz)
    services = sorted({c["service"] for c in chunks})
    log("services: %s" % ", ".join(services))

    # the interval in progress at SIGTERM was written (an interval's work may be under way when
    # the signal comes: the last one then ends a little later)
    last_end = max(c["end_ns"] for c in chunks) / 1e9
    check(-0.1 < last_end - term_at < 3.0, "last chunk ends %.2f s from SIGTERM"
          % (last_end - term_at))

    # the known call tree, per binary flavour
    flavours = {"pfr-calltree-pie": ("pfr_heavy", "pfr_light"),
                "pfr-calltree-nopie": ("pfr_heavy", "pfr_light"),
                "pfr-calltree-shared": ("pfr_heavy", "pfr_light"),
                "pfr-calltree-cpp": ("pfrtest::Worker::heavy(long long)",
                                     "pfrtest::Worker::light(long long)"),
                "pfr-calltree-go": ("main.heavy", "main.light")}
    for svc, (heavy, light) in flavours.items():
        if svc not in dict(variants):
            continue
        ss = ours(svc)
        if not check(ss, "no samples for service %s" % svc):
            continue
        ratio, n = split_ratio(ss, heavy, light)
        total = sum(s["value"] for s in ss)
        log("%-22s samples=%5d share under %s = %.1f%% (of %.0f%% of its samples)"
            % (svc, total // (1000000000 // hz), heavy, 100 * ratio, 100 * n / total))
        check(abs(ratio - 0.75) <= 0.05, "%s: %s has %.1f%% of the time, expected 75 +- 5"
              % (svc, heavy, 100 * ratio))
        check(n >= 0.9 * total, "%s: only %.0f%% of samples under %s/%s"
              % (svc, 100 * n / total, heavy, light))
        # (a sample taken between fork and exec may carry the parent's comm)
        own = sum(s["value"] for s in ss if s["comm"] == svc[:15])
        check(own >= 0.99 * total, "%s: comm labels %r" % (svc, {s["comm"] for s in ss}))
    # leaf-first order: burn, heavy, work loop, main
    for s in ours("pfr-calltree-pie"):
        fs = names(s)
        if "pfr_heavy" in fs and "pfr_burn" in fs:
            order = [fs.index(x) for x in ("pfr_burn", "pfr_heavy", "pfr_work_loop", "main")
                     if x in fs]
            check(order == sorted(order) and len(order) == 4,
                  "pfr-calltree-pie stack not leaf first: %r" % fs)
            break
    # shared library frames name the library
    for s in ours("pfr-calltree-shared"):
        for f in s["frames"]:
            if f["function"] == "pfr_heavy":
                check(f["module"].endswith("libpfrcalltree.so"), "pfr_heavy module %r" % f["module"])
                break
        else:
            continue
        break
    # DWARF file:line for the C workload
    lines = {(f["file"], f["line"]) for s in ours("pfr-calltree-pie")
             for f in s["frames"] if f["function"] == "pfr_heavy"}
    check(any(fl[0].endswith("calltree_lib.c") and fl[1] > 0 for fl in lines),
          "pfr_heavy has no file:line from DWARF: %r" % lines)

    # stripped: module+0xoffset frames, and the split shows through the callers' offsets
    ss = ours("pfr-calltree-stripped")
    if check(ss, "no samples for pfr-calltree-stripped"):
        pat = re.compile(r"pfr-calltree-stripped\+0x[0-9a-f]+$")
        total = sum(s["value"] for s in ss)
        named = [s for s in ss if any(pat.search(f) for f in names(s))]
        nv = sum(s["value"] for s in named)
        check(nv >= 0.9 * total, "stripped: %.0f%% of samples have module+0x frames"
              % (100 * nv / total))
        by_caller = {}
        for s in named:
            fs = names(s)
            if len(fs) >= 3 and pat.search(fs[0]) and pat.search(fs[1]):
                by_caller[fs[1]] = by_caller.get(fs[1], 0) + s["value"]
        top = sorted(by_caller.values(), reverse=True)[:2]
        if check(len(top) == 2, "stripped: callers of the leaf %r" % by_caller):
            r = top[0] / (top[0] + top[1])
            log("pfr-calltree-stripped  split by caller offset = %.1f%%" % (100 * r))
            check(abs(r - 0.75) <= 0.05, "stripped: split %.1f%%, expected 75 +- 5" % (100 * r))

    # syscalls: kernel frames, leaf first, before the user frames
    ss = ours("pfr-syscalls")
    if check(ss, "no samples for pfr-syscalls"):
        total = sum(s["value"] for s in ss)
        kern = [s for s in ss if any(f["module"] == "[kernel]" for f in s["frames"])]
        kv = sum(s["value"] for s in kern)
        check(kv >= 0.5 * total, "pfr-syscalls: %.0f%% of samples with kernel frames"
              % (100 * kv / total))
        # libc's read() wrapper has no frame of its own, so a frame-pointer walk from it skips
        # its caller (pfr_do_reads): expect read, then main of the workload
        good = 0
        for s in kern:
            mods = [f["module"] == "[kernel]" for f in s["frames"]]
            k_end = mods.index(False) if False in mods else len(mods)
            user = s["frames"][k_end:]
            if (all(mods[:k_end]) and not any(mods[k_end:]) and user and
                    "read" in user[0]["function"] and
                    any(f["function"] == "main" and f["module"].endswith("pfr-syscalls")
                        for f in user)):
                good += s["value"]
        check(good >= 0.8 * kv, "pfr-syscalls: %.0f%% of kernel samples are kernel frames "
              "then user frames from read() down to main" % (100 * good / max(kv, 1)))
        kfuncs = {f["function"] for s in kern for f in s["frames"] if f["module"] == "[kernel]"}
        check(any("read" in k for k in kfuncs), "no read syscall frame in %r" % sorted(kfuncs)[:20])

    # short-lived processes: attributed, named, symbolized
    ss = samples_of(chunks, "pfr-short-lived")
    pids = {s["pid"] for s in ss}
    spin_pids = {s["pid"] for s in ss if "pfr_short_spin" in names(s)}
    log("short-lived: %d of 5 processes have samples, %d in pfr_short_spin (%d records)"
        % (len(pids & set(short_pids)), len(spin_pids & set(short_pids)), len(ss)))
    check(set(short_pids) <= pids, "short-lived pids %r, sampled %r" % (short_pids, sorted(pids)))
    check(len(spin_pids & set(short_pids)) >= 4, "short-lived: pfr_short_spin seen in %d of 5"
          % len(spin_pids & set(short_pids)))
    own = [f for s in ss for f in s["frames"] if f["module"].endswith("/pfr-short-lived")]
    unnamed = [f["function"] for f in own if "+0x" in f["function"]]
    check(own and not unnamed, "short-lived: frames of its binary not named: %r" % unnamed[:5])
    # its libraries were mapped after its first sample (in the dynamic loader): main's caller
    # must still resolve to libc, not "[unknown]"
    below_main = []
    for s in ss:
        fs = names(s)
        if "pfr_short_spin" in fs and "main" in fs:
            i = fs.index("main")
            if i < len(fs) - 1:
                below_main.append(s["frames"][i + 1]["module"])
    libc = [m for m in below_main if "libc" in m]
    check(below_main and len(libc) >= 0.9 * len(below_main), "short-lived: main called from %r"
          % sorted(set(below_main)))
    check(all(s["comm"] == "pfr-short-lived" for s in ss), "short-lived comm labels")


def read_stat(text, key):
    m = re.findall(key + r"=(\d+)", text)
    return int(m[-1]) if m else None


def test_stress(args, tmp):
    env = {}
    if args.sanitized:
        env["ASAN_OPTIONS"] = "quarantine_size_mb=4:detect_leaks=1"
    interval = 2
    # the daemon raises its own priority (nice -10, checked in test_metrics); the storm and
    # everything else run at the default
    rec = Recorder(args, tmp, ["--interval", str(interval), "--log-level", "debug"], env)
    rate, secs = 500, 20
    time.sleep(interval + 1)  # the storm hits a running daemon, past its first (cold) interval

    def cpu_intervals():
        # CPU intervals only: a Go program another job runs on this host may be scraped or
        # heap-profiled too, in windows of its own
        return [(c["start_ns"], c["end_ns"]) for c in dump(args, rec.store, "--meta")
                if c["types"] == ["ebpf:cpu:nanoseconds"]]

    # What is there before the storm was written before this look: no lateness to tell.
    last_start = time.time()
    before = set(cpu_intervals())
    storm = subprocess.Popen([os.path.join(args.workloads, "pfr-spawn-storm"), str(rate), str(secs),
                              os.path.join(args.workloads, "pfr-short-lived"), "1"],
                             stdout=subprocess.PIPE, text=True)
    t0 = time.time()
    storm_ns = time.time_ns()
    rss = []
    # When each interval was first seen (the end of the poll that found it), and the start of
    # the poll before, whose snapshot did not hold it yet: it was written between the two.
    first_seen, not_before = {}, {}
    while storm.poll() is None:
        rss.append((time.time() - t0, rec.rss_kib()))
        start = time.time()
        for key in cpu_intervals():
            if key not in first_seen and key not in before:
                first_seen[key], not_before[key] = time.time(), last_start
        last_start = start
        time.sleep(0.25)
    out = storm.stdout.read()
    log("storm: " + out.strip())
    m = re.search(r"started (\d+)", out)
    started = int(m.group(1)) if m else 0
    # 500/s is the aim; a small VM may not fork+exec that fast even with the recorder off, so the
    # test needs a real storm, not the full rate
    log("storm rate: %.0f processes/s (aim %d/s)" % (started / secs, rate))
    check(started >= 50 * secs, "only %d processes started: not a storm" % started)
    rc, _, _ = rec.stop()
    check(rc == 0, "recorder exit code %d" % rc)

    intervals = sorted(first_seen)
    late = [(ts - end / 1e9) for (start, end), ts in first_seen.items()]
    # the least it can have been late: the poll's own period under load is not the recorder's
    late_lo = [max(0.0, not_before[k] - k[1] / 1e9) for k in first_seen]
    log("intervals written during the storm: %d, max lateness %.2f s (at least %.2f s)"
        % (len(intervals), max(late) if late else -1, max(late_lo) if late_lo else -1))
    # (the last interval may end after the storm's last look)
    check(len(intervals) >= secs // interval - 2, "only %d intervals written" % len(intervals))
    # keeping up: each interval written before the next one ends (at the latest: late_lo; the
    # poll itself takes a while on a busy machine), most of them at once
    # (a sanitizer build runs several times slower: there the storm checks memory errors and
    # bounds, and timing only loosely)
    slow = 3 if args.sanitized else 1
    check(max(late_lo) < slow * interval + 1,
          "an interval was written %.2f s after its end" % max(late_lo))
    # (the median: under 1 s in the release build, which release_recorder_daemon_stress holds
    # to it; the ASan build beside a CPU hog on each core of a slow machine took 3.79 s, so there
    # it is held to two intervals: behind, but keeping up)
    median = sorted(late)[len(late) // 2]
    check(median < (2.0 * interval if args.sanitized else 1.0), "median lateness %.2f s" % median)
    # contiguous while the storm runs: before it, on an idle machine, an interval may hold no
    # sample at all, and then no CPU profile is written for it
    stormy = [iv for iv in intervals if iv[0] >= storm_ns]
    for a, b in zip(stormy, stormy[1:]):
        check(a[1] == b[0], "gap or overlap between intervals %r and %r" % (a, b))

    peak = max(r for _, r in rss)
    mid = [r for t, r in rss if secs / 4 <= t < secs / 2]
    end_ = [r for t, r in rss if t >= secs * 3 / 4]
    log("recorder RSS: peak %d KiB, max in the second quarter %d KiB, in the last quarter %d KiB"
        % (peak, max(mid), max(end_)))
    # bounded: the symbol cache has a cap and exited processes are forgotten after each drain,
    # so the last quarter may not exceed the second by more than what the cache may still fill
    if args.sanitized:
        check(max(end_) <= max(mid) * 1.5 + 32768, "RSS grew from %d to %d KiB" % (max(mid), max(end_)))
    else:
        check(peak < 64 * 1024, "RSS peak %d KiB over 64 MiB" % peak)
    text = rec.log_text()
    live = read_stat(text, "live")
    seen = read_stat(text, r"processes\{seen")
    forgotten = read_stat(text, "forgotten")
    log("processes: seen=%s live=%s forgotten=%s" % (seen, live, forgotten))
    check(live is not None and live < 2000, "process records live at the end: %s" % live)
    check(forgotten is not None and forgotten > 0, "no process forgotten")

    chunks = dump(args, rec.store)
    ss = samples_of(chunks, "pfr-short-lived")
    pids = {s["pid"] for s in ss}
    log("short-lived in the store: %d processes, %d samples" % (len(pids), len(ss)))
    check(len(pids) > 50, "only %d short-lived processes attributed" % len(pids))
    # a process sampled between fork and exec carries its parent's comm until exec is seen
    named = sum(1 for s in ss if s["comm"] == "pfr-short-lived")
    check(named >= 0.95 * len(ss), "short-lived comm labels: %d of %d" % (named, len(ss)))


def write_config(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def wait_for_service(args, store, service, after_ns, limit):
    """Poll the ring until a chunk of service ending after after_ns has samples."""
    end = time.time() + limit
    while time.time() < end:
        for c in dump(args, store, "--meta"):
            if c["service"] == service and c["end_ns"] > after_ns and c.get("total", 0) > 0:
                return True
        time.sleep(0.5)
    return False


def thp_offered():
    """Whether the kernel gives transparent huge pages to a heap that asks (mode not never)."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return "[never]" not in f.read()
    except OSError:
        return False


def check_heap_pages(args, rec, want):
    """The recorder ran itself again for a heap on huge pages (want) or did not: its environment
    and log say which, and its name is its file's either way."""
    with open("/proc/%d/comm" % rec.proc.pid) as f:
        comm = f.read().strip()
    check(comm == os.path.basename(args.recorder)[:15], "the recorder is named %r" % comm)
    with open("/proc/%d/environ" % rec.proc.pid, "rb") as f:
        env = f.read().decode(errors="replace").split("\0")
    huge = any(e.startswith("GLIBC_TUNABLES=") and "glibc.malloc.hugetlb=1" in e for e in env)
    said = "memory: the heap on transparent huge pages" in rec.log_text()
    want = want and thp_offered()
    check(huge == want and said == want, "heap on huge pages: environment %s, log %s, wanted %s"
          % (huge, said, want))
    # (/proc/PID/environ is the exec's block: the mark, unset in the second start, is still there)
    check(any(e.startswith("PFR_HEAP_PAGES_EXEC=") for e in env) == want,
          "the second start's mark: %r" % [e for e in env if e.startswith("PFR_HEAP")])


def test_signals(args, tmp):
    cfg = os.path.join(tmp, "recorder.ini")
    write_config(cfg, "[recorder]\nlog_level = info\n[service]\nrule = comm pfr-calltree* before-hup\n")
    rec = Recorder(args, tmp, ["--config", cfg, "--interval", "1"])
    check_heap_pages(args, rec, True)  # the default; a SIGHUP below reloads in the second start
    work = subprocess.Popen([os.path.join(args.workloads, "pfr-calltree-pie"), "120"])
    check(wait_for_service(args, rec.store, "before-hup", 0, 30), "no before-hup profile")
    # a broken file: the daemon keeps running with what it had
    write_config(cfg, "[recorder]\ncpu_hz = many\n")
    rec.proc.send_signal(signal.SIGHUP)
    rec.wait_log("configuration not reloaded", 10)
    check(rec.proc.poll() is None, "recorder died on a bad reload")
    write_config(cfg, "[recorder]\nlog_level = debug\n[service]\nrule = comm pfr-calltree* after-hup\n")
    hup_ns = time.time_ns()
    rec.proc.send_signal(signal.SIGHUP)
    rec.wait_log("configuration reloaded", 10)
    check(wait_for_service(args, rec.store, "after-hup", hup_ns, 30), "no after-hup profile")
    time.sleep(0.5)
    rc, took, term_at = rec.stop(signal.SIGTERM)
    work.kill()
    work.wait()
    check(rc == 0, "exit code %d after SIGTERM" % rc)
    check(took < 5, "took %.1f s to exit" % took)
    text = rec.log_text()
    check("cpu: samples=" in text, "debug statistics not logged after the reload")
    chunks = dump(args, rec.store)
    svcs = {c["service"] for c in chunks}
    check({"before-hup", "after-hup"} <= svcs, "services %r" % svcs)
    after = [c for c in chunks if c["service"] == "after-hup"]
    check(all(c["end_ns"] > hup_ns for c in after), "after-hup before the SIGHUP")
    last_end = max(c["end_ns"] for c in chunks)
    check(-0.1 < last_end / 1e9 - term_at < 3.0, "last chunk ends %.2f s from SIGTERM"
          % (last_end / 1e9 - term_at))
    last = [c for c in chunks if c["end_ns"] == last_end]
    check(any(c["service"] == "after-hup" and c["total"] > 0 for c in last),
          "last interval not flushed: %r" % [(c["service"], c["total"]) for c in last])

    # SIGINT also writes and exits 0
    tmp2 = os.path.join(tmp, "int")
    os.mkdir(tmp2)
    rec = Recorder(args, tmp2, ["--interval", "30", "--huge-pages", "false"])
    check_heap_pages(args, rec, False)
    work = subprocess.Popen([os.path.join(args.workloads, "pfr-calltree-pie"), "1.5"])
    work.wait()
    rc, _, _ = rec.stop(signal.SIGINT)
    check(rc == 0, "exit code %d after SIGINT" % rc)
    chunks = dump(args, rec.store, "--meta")
    check(any(c["service"] == "pfr-calltree-pie" for c in chunks), "SIGINT did not flush")


def test_pins(args, tmp):
    """`pfr pin` and `pfr unpin` against the ring of a running recorder (0.25 s intervals), 40
    pins and 20 releases: each pin's write lock held a few ms at most (pfr pin prints it: the
    recorder's writer waits for no longer), the recorder writing on without an error, the pins
    listed with their bytes; then with the recorder stopped, a pin still made, and carried off
    with `pfr export --ring FILE --pin ID`."""
    cfg = os.path.join(tmp, "recorder.ini")
    write_config(cfg, "[recorder]\nlog_level = info\n[service]\nrule = comm pfr-calltree* pinned\n")
    rec = Recorder(args, tmp, ["--config", cfg, "--interval", "0.25"])
    work = subprocess.Popen([os.path.join(args.workloads, "pfr-calltree-pie"), "120"])
    # the ring has a schema now; its first CPU interval ends a quarter second later
    end = time.time() + 30
    while newest_cpu_end(args, rec.store) is None and time.time() < end:
        time.sleep(0.25)
    check(wait_for_service(args, rec.store, "pinned", 0, 30), "no profile of the workload")
    pfr = [args.pfr, "--store", rec.store]
    held, made, preempted = [], [], []
    lock_re = re.compile(r"^pin (\d+): .*write lock held ([0-9.]+) ms(, preempted)?", re.M)
    t0 = time.time()
    for i in range(40):
        r = run_cli(args, pfr + ["pin", "--from", "-3s", "--to", "now", "--service", "pinned",
                                 "--reason", "itest %d" % i])
        m = lock_re.search(r.stdout)
        if not check(r.returncode == 0 and m, "pin %d: rc %d %s %s" % (i, r.returncode,
                                                                      r.stdout, r.stderr)):
            continue
        made.append(int(m.group(1)))
        # a pin the scheduler took the CPU from while it held the lock measures the machine's
        # load (2 cores shared with other builds), not the pin: counted and shown apart
        (preempted if m.group(3) else held).append(float(m.group(2)))
        if i % 2 == 1:
            r = run_cli(args, pfr + ["unpin", str(made[-2])])
            check(r.returncode == 0, "unpin %d: %s" % (made[-2], r.stderr))
        time.sleep(0.05)
    took = time.time() - t0
    held.sort()
    if held:
        log("40 pins beside the recorder in %.1f s: write lock held median %.2f ms, p90 %.2f ms, "
            "max %.2f ms; %d more preempted while they held it (%s ms)"
            % (took, held[len(held) // 2], held[int(len(held) * 0.9)], held[-1], len(preempted),
               ", ".join("%.1f" % x for x in sorted(preempted))))
        check(held[-1] < 5.0, "a pin held the ring's write lock %.2f ms" % held[-1])
    check(len(held) >= 30, "only %d of 40 pins ran without preemption" % len(held))
    r = run_cli(args, pfr + ["pins", "--format", "json"])
    pins = json.loads(r.stdout) if r.returncode == 0 else []
    kept = [p["id"] for p in pins]
    check(kept == made[1::2], "pins kept %r, not the ones not released %r" % (kept, made[1::2]))
    check(all(p["service"] == "pinned" and p["origin"].startswith("manual:root") for p in pins),
          "pins: %r" % pins[:2])
    with_bytes = sum(1 for p in pins if p["bytes"] > 0)
    check(with_bytes >= len(pins) - 2, "%d of %d pins keep no chunk" % (len(pins) - with_bytes,
                                                                       len(pins)))
    check(rec.proc.poll() is None, "recorder died")
    newest_before = newest_cpu_end(args, rec.store)
    time.sleep(1.0)
    newest = newest_cpu_end(args, rec.store)
    check(newest and newest_before and newest > newest_before, "the recorder stopped writing")
    rc, _, _ = rec.stop(signal.SIGTERM)
    work.kill()
    work.wait()
    check(rc == 0, "recorder exit code %d" % rc)
    text = rec.log_text()
    for bad in ("cannot write", "database is locked", "busy"):
        check(bad not in text, "recorder log says %r" % bad)
    # stopped: pins still made, the ring reads whole, a pin carried off
    r = run_cli(args, pfr + ["pin", "--from", "-1m", "--to", "now", "--reason", "after stop"])
    check(r.returncode == 0, "pin with the recorder stopped: %s" % r.stderr)
    out = os.path.join(tmp, "pin.db")
    r = run_cli(args, pfr + ["export", "--ring", out, "--pin", str(kept[-1])])
    check(r.returncode == 0, "export --pin: %s" % r.stderr)
    r = run_cli(args, [args.pfr, "--store", out, "ls", "--format", "json"])
    ls = json.loads(r.stdout) if r.returncode == 0 else {}
    check([s["name"] for s in ls.get("services", [])] == ["pinned"], "export --pin: %r" % ls)
    chunks = dump(args, rec.store, "--meta")
    check(len(chunks) > 0, "the ring reads back")


def run_cli(args, argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, **kw)


def test_config(args, tmp):
    r = run_cli(args, [args.recorder, "--help"])
    check(r.returncode == 0 and "--store PATH" in r.stdout, "--help: %d %r" % (r.returncode, r.stdout[:80]))
    r = run_cli(args, [args.recorder, "--version"])
    check(r.returncode == 0 and r.stdout.startswith("pfr-recorder "), "--version: %r" % r.stdout)

    bad = os.path.join(tmp, "bad.ini")
    write_config(bad, "[recorder]\nstore = /tmp/x.db\ncpu_hzz = 100\n")
    r = run_cli(args, [args.recorder, "--config", bad])
    check(r.returncode == 2 and ("%s:3: unknown key 'cpu_hzz'" % bad) in r.stderr,
          "bad key: %d %r" % (r.returncode, r.stderr))
    r = run_cli(args, [args.recorder, "--cpu-hz", "abc"])
    check(r.returncode == 2 and "--cpu-hz: 'abc'" in r.stderr, "bad flag: %r" % r.stderr)
    r = run_cli(args, [args.recorder, "--config", os.path.join(tmp, "missing.ini")])
    check(r.returncode == 2 and "cannot open config file" in r.stderr, "missing file: %r" % r.stderr)
    r = run_cli(args, [args.recorder], env=dict(os.environ, PFR_INTERVAL="soon"))
    check(r.returncode == 2 and "PFR_INTERVAL" in r.stderr, "bad env: %r" % r.stderr)

    store = os.path.join(tmp, "caps.db")
    setpriv = shutil.which("setpriv")
    check(setpriv, "setpriv (util-linux) missing: capability checks cannot run")
    if setpriv:
        # an unprivileged user
        r = run_cli(args, [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
                           args.recorder, "--store", store])
        check(r.returncode == 1 and "missing capability CAP_BPF and CAP_PERFMON" in r.stderr,
              "as nobody: %d %r" % (r.returncode, r.stderr))
        # root without capabilities
        r = run_cli(args, [setpriv, "--inh-caps=-all", "--bounding-set=-all",
                           args.recorder, "--store", store])
        check(r.returncode == 1 and "missing capability" in r.stderr,
              "root without capabilities: %d %r" % (r.returncode, r.stderr))
    check(not os.path.exists(store), "store created although BPF could not load")

    r = run_cli(args, [args.recorder, "--store", "/proc/self/nonexistent/ring.db"])
    check(r.returncode == 1 and "cannot open the ring" in r.stderr, "bad store: %d %r"
          % (r.returncode, r.stderr))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chunks_of_type(args, store, service, typ):
    # chosen by the store's scan: the tests poll this every second, and the rest of a busy
    # host's ring, decoded and parsed each time, was most of their CPU
    return [c for c in dump(args, store, "--samples", ("--service", service, "--type", typ))
            if c["service"] == service and typ in c["types"]]


def wait_chunks(args, store, service, typ, limit, pred=lambda cs: bool(cs)):
    end = time.time() + limit
    while time.time() < end:
        try:
            cs = chunks_of_type(args, store, service, typ)
        except subprocess.CalledProcessError as e:
            # a reader beside the writer may find the ring busy: not yet; the look after the
            # limit must read it
            log("the ring could not be read: %s" % (e.stderr or "").strip()[:200])
            cs = []
        if pred(cs):
            return cs
        time.sleep(1)
    return chunks_of_type(args, store, service, typ)


GOHEAP_INTERVAL = 3


def check_goheap_times(args, store, pid):
    """Each heap chunk covers its own collection interval: [start, end) ends when it was collected
    (when it appears in the ring, give or take the write), and the next one starts there."""
    first_seen = {}
    end = time.time() + 4 * GOHEAP_INTERVAL + 2
    while time.time() < end and len(first_seen) < 4:
        now = time.time()
        for c in dump(args, store, "--meta"):
            if c["labels"].get("pid") == str(pid) and c["id"] not in first_seen:
                first_seen[c["id"]] = (now, c)
        time.sleep(0.2)
    # the chunks present at the first look were written before it: only later ones are timed
    seen = sorted(first_seen.values(), key=lambda x: x[1]["start_ns"])
    timed = [(t, c) for t, c in seen if t > seen[0][0] + 0.01] if seen else []
    if not check(len(timed) >= 2, "only %d heap chunks appeared while watched" % len(timed)):
        return
    for t, c in timed:
        lag = t - c["end_ns"] / 1e9
        check(-0.5 < lag < 1.5, "heap chunk %d ends %.2f s before it appeared in the ring "
              "(its [start, end) is not the interval collected)" % (c["id"], lag))
        dur = (c["end_ns"] - c["start_ns"]) / 1e9
        check(GOHEAP_INTERVAL - 1 < dur < GOHEAP_INTERVAL + 1, "heap chunk %d lasts %.2f s, the "
              "interval is %d s" % (c["id"], dur, GOHEAP_INTERVAL))
    for (_, a), (_, b) in zip(seen, seen[1:]):
        check(abs(b["start_ns"] - a["end_ns"]) < 50_000_000, "heap chunks %d and %d are not "
              "back to back: %d ns apart" % (a["id"], b["id"], b["start_ns"] - a["end_ns"]))


def test_goheap(args, tmp):
    """The daemon profiles the heap of a Go program that does not import pprof (force mode)."""
    exe = os.path.join(args.workloads, "pfr-goheap-alloc")
    if not check(os.path.exists(exe), "%s not built (needs Debian's Go)" % exe):
        return
    go = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    check(go.stdout.readline().strip() == "ready", "pfr-goheap-alloc did not start")
    try:
        rec = Recorder(args, tmp, ["--interval", "1", "--go-heap-profiler", "force",
                                   "--go-heap-interval", str(GOHEAP_INTERVAL),
                                   "--metrics-listen", "off", "--log-level", "debug"])
        check(rec.wait_log("MemProfileRate was 0", 20),
              "no log line for switching sampling on in pid %d" % go.pid)
        for _ in range(2):  # allocations after sampling was switched on
            go.stdin.write("phase\n")
            go.stdin.flush()
            check(go.stdout.readline().startswith("done"), "alloc phase")
        typ = "go_runtime:heap_alloc_space:bytes"
        want = {"main.allocSmall", "main.allocMedium", "main.allocLarge"}

        def has_sites(cs):
            fns = {f["function"] for c in cs for s in c.get("samples", []) for f in s["frames"]}
            return want <= fns
        cs = wait_chunks(args, rec.store, "pfr-goheap-alloc", typ, 30, has_sites)
        check_goheap_times(args, rec.store, go.pid)
        rc, _, _ = rec.stop()
        check(rc == 0, "recorder exit code %d" % rc)
        if not check(cs, "no %s chunks for pfr-goheap-alloc" % typ):
            return
        c = cs[-1]
        check(set(c["types"]) == {"go_runtime:heap_alloc_objects:count", typ,
                                  "go_runtime:heap_inuse_objects:count",
                                  "go_runtime:heap_inuse_space:bytes"}, "types %r" % c["types"])
        check(c["labels"].get("pid") == str(go.pid), "pid label %r" % c["labels"])
        check(c["labels"].get("host.name"), "no host.name label")
        check(has_sites(cs), "allocation sites missing from the heap profiles")
    finally:
        go.kill()
        go.wait()


def test_scrape(args, tmp):
    """With no configuration the daemon finds a local Go pprof server and scrapes it."""
    exe = os.path.join(args.workloads, "pfr-pprofsrv")
    if not check(os.path.exists(exe), "%s not built (needs Debian's Go)" % exe):
        return
    srv = subprocess.Popen([exe, "-addr", "127.0.0.1:0"], stdout=subprocess.PIPE, text=True)
    ctr, cgroup, unit_srv, made = None, None, None, []
    v2 = "/sys/fs/cgroup/unified"  # hybrid hierarchy; else the unified one is the root
    v2 = v2 if os.path.exists(v2 + "/cgroup.procs") else "/sys/fs/cgroup"
    try:
        line = srv.stdout.readline().strip()
        check(line.startswith("pprof="), "pprofsrv said %r" % line)
        # A systemd service: the same program in a /system.slice/<unit>.service cgroup (a Coroot
        # id outside Kubernetes), whose scrapes carry the namespace and pod of its Coroot
        # instance, which Coroot's per-instance view filters go:* profiles by
        unit = "pfr-scrape-%s" % os.urandom(4).hex()
        for rel in ("system.slice", "system.slice/%s.service" % unit):
            if not os.path.isdir(os.path.join(v2, rel)):
                os.mkdir(os.path.join(v2, rel))
                made.insert(0, os.path.join(v2, rel))
        # (its goroutine profile is all that is checked: it does no other work, so the test
        # takes no CPU it does not look at)
        unit_srv = subprocess.Popen(["sh", "-c", "echo $$ > %s/system.slice/%s.service/cgroup.procs"
                                     " && exec %s -addr 127.0.0.1:0 -work none" % (v2, unit, exe)],
                                    stdout=subprocess.PIPE, text=True)
        uline = unit_srv.stdout.readline().strip()
        check(uline.startswith("pprof="), "pprofsrv in a unit said %r" % uline)
        rec = Recorder(args, tmp, ["--interval", "1", "--scrape-interval", "6",
                                   "--scrape-cpu-seconds", "5", "--go-heap-profiler", "disabled",
                                   "--cpu-hz", "499", "--metrics-listen", "off"])
        typ = "go:goroutine_goroutine:count"
        cs = wait_chunks(args, rec.store, "pfr-pprofsrv", typ, 40)
        # CPU profiles are 5 s long. The one compared must have eBPF intervals with named frames
        # around it: on a busy machine the first seconds of a cold start may leave frames as
        # addresses (the symbolizing budget keeps intervals on time)
        cpu = wait_chunks(args, rec.store, "pfr-pprofsrv", "go:profile_cpu:nanoseconds", 60,
                          lambda cs: comparable_cpu(args, rec.store, cs) is not None)
        # A "container": the same program on the same 127.0.0.1:PORT, but in a network namespace
        # of its own and a docker-<id>.scope cgroup. The daemon (root here, so it may setns)
        # scrapes it from inside its namespace and names it by its container, as its eBPF side.
        # Its CPU and goroutine profiles are checked: it burns CPU and parks goroutines only.
        cid = os.urandom(32).hex()
        cgroup = "%s/docker-%s.scope" % (v2, cid)
        os.mkdir(cgroup)
        ctr = subprocess.Popen(["unshare", "--net", "sh", "-c",
                                "ip link set lo up && echo $$ > %s/cgroup.procs && exec %s -addr %s"
                                " -work cpu"
                                % (cgroup, exe, line[len("pprof="):])],
                               stdout=subprocess.PIPE, text=True)
        cline = ctr.stdout.readline().strip()
        check(cline == line, "pprofsrv in its network namespace said %r" % cline)
        ccpu = wait_chunks(args, rec.store, cid[:12], "go:profile_cpu:nanoseconds", 40)
        ccs = chunks_of_type(args, rec.store, cid[:12], typ)
        ucs = wait_chunks(args, rec.store, "/system.slice/%s.service" % unit, typ, 40)
        rc, _, _ = rec.stop()
        check(rc == 0, "recorder exit code %d" % rc)
        if check(cs, "no goroutine profile of pfr-pprofsrv scraped"):
            fns = {f["function"] for c in cs for s in c.get("samples", []) for f in s["frames"]}
            check("main.parkedGoroutine" in fns, "goroutine profile lacks main.parkedGoroutine")
            check(cs[-1]["labels"].get("instance") == line[len("pprof="):],
                  "instance label %r" % cs[-1]["labels"])
        if check(cpu, "no CPU profile of pfr-pprofsrv scraped"):
            check(cpu[-1]["types"] == ["go:profile_cpu:nanoseconds"],
                  "CPU profile types %r (samples column kept?)" % cpu[-1]["types"])
            fns = {f["function"] for c in cpu for s in c.get("samples", []) for f in s["frames"]}
            check("main.burnCPU" in fns, "scraped CPU profile lacks main.burnCPU")
            check_cpu_shape(args, rec.store, comparable_cpu(args, rec.store, cpu) or cpu[-1])
        check("scrape: target http://" in rec.log_text(), "no log line for the discovered target")
        if check(ccpu, "no CPU profile of the pprofsrv in its own network namespace scraped"):
            fns = {f["function"] for c in ccpu for s in c.get("samples", []) for f in s["frames"]}
            check("main.burnCPU" in fns, "its scraped CPU profile lacks main.burnCPU")
        if check(ccs, "no goroutine profile of the pprofsrv in its own network namespace"):
            fns = {f["function"] for c in ccs for s in c.get("samples", []) for f in s["frames"]}
            check("main.parkedGoroutine" in fns, "its goroutine profile lacks main.parkedGoroutine")
        check("other network namespaces" not in rec.log_text(), "setns refused or broken")
        if check(ucs, "no goroutine profile of the pprofsrv in a systemd unit"):
            want = {"container.id": "/system.slice/%s.service" % unit, "namespace": "_",
                    "pod": "%s@%s" % (unit, socket.gethostname())}
            got = {k: ucs[-1]["labels"].get(k) for k in want}
            check(got == want, "the unit's scrape labels %r, want %r" % (got, want))
        # without a Coroot id (no Docker here to name the "container"), no instance either
        for c in ccs[-1:] + cs[-1:]:
            if "container.id" not in c["labels"]:
                check("pod" not in c["labels"] and "namespace" not in c["labels"],
                      "instance labels without a container id: %r" % c["labels"])
    finally:
        srv.kill()
        srv.wait()
        for p in (ctr, unit_srv):
            if p:
                p.kill()
                p.wait()
        for path in made:
            remove_cgroup(path)
        if cgroup:
            remove_cgroup(cgroup)


def remove_cgroup(path):
    """rmdir a cgroup, waiting for a killed process to leave it."""
    for _ in range(50):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)
    log("could not remove cgroup %s" % path)


def go_alloc_bytes(text, pid):
    m = re.search(r'^container_go_alloc_bytes_total\{[^}]*pid="%d"[^}]*\} (\S+)$' % pid, text,
                  re.M)
    return float(m.group(1)) if m else -1


def share_under(chunks, fn, lo, hi, match=None):
    """Share of the value of chunks overlapping [lo, hi) whose stack holds fn (or a function
    match accepts), whole chunks counted."""
    match = match or (lambda f: f == fn)
    tot = hit = 0
    for c in chunks:
        if c["end_ns"] <= lo or c["start_ns"] >= hi:
            continue
        for s in c.get("samples", []):
            tot += s["value"]
            if any(match(f["function"]) for f in s["frames"]):
                hit += s["value"]
    return (hit / tot if tot else None), tot


# The scrape test's shape check: Go's CPU profile samples at 100 Hz, the recorder at 499 Hz.
GO_CPU_PERIOD_NS = 10_000_000
SCRAPE_EBPF_PERIOD_NS = 1e9 / 499
# The fewest samples of each a compared window needs: a host whose CPU hogs leave the server a
# few percent of a core gives 15 Go samples in 5 s, where one sample is 7 points of share.
SHAPE_MIN_GO, SHAPE_MIN_EBPF = 50, 250


def shape_counts(ebpf, c):
    """Samples of the scraped chunk c and of the eBPF profile over its seconds."""
    lo, hi = c["start_ns"], c["end_ns"]
    _, go_tot = share_under([c], "main.burnCPU", lo, hi)
    _, bpf_tot = share_under(ebpf, "main.burnCPU", lo, hi)
    return go_tot / GO_CPU_PERIOD_NS, bpf_tot / SCRAPE_EBPF_PERIOD_NS


def comparable_cpu(args, store, scraped):
    """The newest scraped CPU chunk whose seconds the eBPF profile covers with named frames, with
    samples enough on both sides to compare."""
    ebpf = chunks_of_type(args, store, "pfr-pprofsrv", "ebpf:cpu:nanoseconds")
    for c in reversed(scraped):
        lo, hi = c["start_ns"], c["end_ns"]
        if not ebpf or max(e["end_ns"] for e in ebpf) < hi:
            continue  # its eBPF intervals are not all written yet
        # frames past the symbolizing budget: module+0xoffset, or an address
        late, tot = share_under(ebpf, "", lo, hi, lambda f: re.match(r"(\S+\+)?0x[0-9a-f]+$", f))
        n_go, n_bpf = shape_counts(ebpf, c)
        if tot and late < 0.1 and n_go >= SHAPE_MIN_GO and n_bpf >= SHAPE_MIN_EBPF:
            return c
    return None


def check_cpu_shape(args, store, c):
    """The scraped Go CPU profile and the eBPF profile of the same process over the same seconds
    agree in shape: the share of time under main.burnCPU within 15 points."""
    lo, hi = c["start_ns"], c["end_ns"]
    ebpf = chunks_of_type(args, store, "pfr-pprofsrv", "ebpf:cpu:nanoseconds")
    go_share, _ = share_under([c], "main.burnCPU", lo, hi)
    bpf_share, n = share_under(ebpf, "main.burnCPU", lo, hi)
    n_go, n_bpf = shape_counts(ebpf, c)
    log("CPU shape over %.1f s: main.burnCPU has %s of the scraped profile (%.0f samples), %s of "
        "eBPF's (%.0f samples, %d ns)" % ((hi - lo) / 1e9, go_share, n_go, bpf_share, n_bpf, n))
    if not check(go_share is not None and bpf_share is not None, "no CPU samples to compare"):
        return
    # a window with too few samples is a failure, not a pass on noise (comparable_cpu waits for
    # one with enough; this is the last one when none came)
    if not check(n_go >= SHAPE_MIN_GO and n_bpf >= SHAPE_MIN_EBPF,
                 "CPU shape: %.0f Go and %.0f eBPF samples, need %d and %d"
                 % (n_go, n_bpf, SHAPE_MIN_GO, SHAPE_MIN_EBPF)):
        return
    # 15 points, or 4 standard errors of the difference of two shares at the counts the window
    # got, whichever is wider (15 at a quiet host's ~500 Go samples; ~28 at the least allowed)
    p = (go_share * n_go + bpf_share * n_bpf) / (n_go + n_bpf)
    tol = max(0.15, 4 * math.sqrt(max(p * (1 - p), 0.01) * (1 / n_go + 1 / n_bpf)))
    check(abs(go_share - bpf_share) <= tol, "main.burnCPU: %.0f%% scraped vs %.0f%% eBPF (+-%.0f)"
          % (100 * go_share, 100 * bpf_share, 100 * tol))


def thread_nices(pid):
    """The nice value and the name of each thread of pid."""
    nices, names = [], []
    task = "/proc/%d/task" % pid
    for tid in os.listdir(task):
        try:
            with open(os.path.join(task, tid, "stat")) as f:
                rest = f.read().rsplit(")", 1)[1].split()
            with open(os.path.join(task, tid, "comm")) as f:
                names.append(f.read().strip())
        except OSError:
            continue  # a thread that ended meanwhile
        nices.append(int(rest[16]))  # field 19, counting from the state (field 3)
    return nices, names


def fetch_metrics(port):
    """The recorder's /metrics text."""
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
        return r.read().decode()


def wait_drained(args, store, limit=60):
    """Until an interval that starts after now is in the store: the one holding now has been
    drained (2.5 s on an idle host; a loaded one leaves the recorder behind by more)."""
    now = time.time_ns()
    end = time.time() + limit
    time.sleep(2.5)
    while time.time() < end and not any(c["start_ns"] >= now for c in dump(args, store, "--meta")):
        time.sleep(0.5)


def check_deferred(args, rec, port):
    """Once exits carry mappings, a program already seen is not snapshotted at its first sample,
    and then its new processes do not wake the recorder: a run that outlives the drain is
    snapshotted there, and its frames are named."""
    exe = os.path.join(args.workloads, "pfr-calltree-pie")
    subprocess.run([exe, "0.3"], check=True)  # teaches the paths of its files
    time.sleep(1.5)
    # deferred: from now on its new processes do not wake the recorder, whose notification
    # waits for the next wake-up or the drain
    subprocess.run([exe, "0.3"], check=True)
    time.sleep(1.5)
    run = subprocess.Popen([exe, "3"])
    run.wait()
    wait_drained(args, rec.store)
    m = re.search(r"^pfr_process_snapshots_deferred_total (\S+)$", fetch_metrics(port), re.M)
    check(m and float(m.group(1)) > 0, "no snapshot deferred: %s" % (m.group(0) if m else "none"))
    ss = [s for c in dump(args, rec.store) for s in c["samples"] if s["pid"] == run.pid]
    ratio, n = split_ratio(ss, "pfr_heavy", "pfr_light")
    total = sum(s["value"] for s in ss)
    log("deferred snapshot: %d samples of pid %d, %.0f%% under pfr_heavy/pfr_light"
        % (len(ss), run.pid, 100 * n / total if total else 0))
    check(total and n / total > 0.9, "the deferred process's frames are not named: %d of %d"
          % (n, total))


def check_dlopen(args, rec, port, tmp):
    """A process that loads a library after its snapshot (dlopen), from a file no other process
    maps, and exits before the drain: its exit sends the library's path, so its frames there
    are named. Three short runs: a drain in the middle of one would name it the other way."""
    lib = os.path.join(tmp, "libpfrlate.so")
    shutil.copy(os.path.join(args.workloads, "libpfrcalltree.so"), lib)  # an inode of its own
    exe = os.path.join(args.workloads, "pfr-dlopen-late")
    pids = []
    for _ in range(3):
        p = subprocess.Popen([exe, lib, "50", "0.25"])
        pids.append(p.pid)
        check(p.wait() == 0, "pfr-dlopen-late failed")
    wait_drained(args, rec.store)
    ss = [s for c in dump(args, rec.store) for s in c["samples"] if s["pid"] in pids]
    total = sum(s["value"] for s in ss)
    in_lib = sum(s["value"] for s in ss
                 if any(f["function"] in ("pfr_burn", "pfr_work_loop") and
                        f["module"].endswith("/libpfrlate.so") for f in s["frames"]))
    # an unnamed frame called from main is the library's (elsewhere, [unknown] can be the
    # garbage a frame-pointer walk finds below the loader's code at the start)
    def lost(s):
        fs = names(s)
        return "main" in fs and "[unknown]" in fs[:fs.index("main")]
    unknown = sum(s["value"] for s in ss if lost(s))
    log("dlopen after the snapshot: %d of %d samples named in the library, %d unnamed above main"
        % (in_lib, total, unknown))
    for s in ss:
        if lost(s):
            log("  unnamed: %r" % [(f["function"], f["module"]) for f in s["frames"]])
    check(total and in_lib >= 0.6 * total and unknown == 0,
          "frames of the library loaded late are not named: %d of %d, %d unnamed"
          % (in_lib, total, unknown))
    m = re.search(r'^pfr_process_exit_paths_total\{result="learned"\} (\S+)$', fetch_metrics(port),
                  re.M)
    check(m and float(m.group(1)) > 0, "no path learned from an exit: %s"
          % (m.group(0) if m else "metric missing"))


# test_metrics' sampling rate, the default (at 499 Hz a host at load 140 left its recorder behind
# the checks' fixed waits for the drain)
METRICS_HZ = 100
METRICS_PERIOD = 1000000000 // METRICS_HZ


def check_overlay(args, rec, tmp):
    """A program on overlayfs, as in a container: its processes after the first are named from
    their exits (no snapshot), where the kernel names the layer's file, not the overlay's that
    the first snapshot saw."""
    ovl = os.path.join(tmp, "ovl")
    for d in ("lower", "upper", "work", "merged"):
        os.makedirs(os.path.join(ovl, d))
    shutil.copy(os.path.join(args.workloads, "pfr-calltree-pie"), os.path.join(ovl, "lower"))
    merged = os.path.join(ovl, "merged")
    opts = "lowerdir=%s/lower,upperdir=%s/upper,workdir=%s/work" % (ovl, ovl, ovl)
    if subprocess.run(["mount", "-t", "overlay", "overlay", "-o", opts, merged]).returncode != 0:
        log("overlayfs: cannot mount one here, not checked")
        return
    try:
        exe = os.path.join(merged, "pfr-calltree-pie")
        pids = []
        for _ in range(4):
            p = subprocess.Popen([exe, "0.3"])
            pids.append(p.pid)
            check(p.wait() == 0, "pfr-calltree-pie failed")
            time.sleep(0.3)
        wait_drained(args, rec.store)
        ss = [s for c in dump(args, rec.store) for s in c["samples"] if s["pid"] in pids[1:]]
        ratio, n = split_ratio(ss, "pfr_heavy", "pfr_light")
        total = sum(s["value"] for s in ss)
        log("overlayfs: %d samples of the later runs, %.0f%% under pfr_heavy/pfr_light"
            % (total // METRICS_PERIOD, 100 * n / total if total else 0))
        check(total and n / total > 0.9, "frames of a program on overlayfs not named: %d of %d"
              % (n, total))
    finally:
        subprocess.run(["umount", merged])


def check_jit(args, rec, port, tmp):
    """JIT code is named from the perf map its process writes (Node with --perf-basic-prof).
    The process exits before the last drain: those samples are named from the map kept open."""
    node = shutil.which("node") or shutil.which("nodejs")
    if not check(node, "node not installed (scripts/install-deps.sh installs nodejs)"):
        return
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workloads",
                          "jit_calltree.js")
    # 2.5 s of CPU time, at most 20 s of wall time
    p = subprocess.Popen([node, "--perf-basic-prof", "--interpreted-frames-native-stack", script,
                          "2.5"], cwd=tmp)  # where V8 may write its log
    try:
        check(p.wait(timeout=60) == 0, "node failed")
    finally:
        perf_map = "/tmp/perf-%d.map" % p.pid
        if os.path.exists(perf_map):
            os.unlink(perf_map)
    wait_drained(args, rec.store)
    ss = [s for c in dump(args, rec.store) for s in c["samples"] if s["pid"] == p.pid]
    total = sum(s["value"] for s in ss)

    def jit(s, fn):
        return any(fn in f["function"] and f["module"] == "[jit]" for f in s["frames"])
    heavy = sum(s["value"] for s in ss if jit(s, "pfrJitHeavy"))
    light = sum(s["value"] for s in ss if jit(s, "pfrJitLight"))
    work = sum(s["value"] for s in ss if jit(s, "pfrJitWork"))
    unknown = sum(s["value"] for s in ss
                  if s["frames"] and s["frames"][0]["function"] == "[unknown]")
    ns = METRICS_PERIOD
    log("JIT code: %d samples of node, %d under pfrJitWork, %d in pfrJitHeavy, %d in "
        "pfrJitLight (%.1f%% heavy), %d with an unnamed leaf"
        % (total // ns, work // ns, heavy // ns, light // ns,
           100 * heavy / (heavy + light) if heavy + light else 0, unknown // ns))
    check(total > 0 and work >= 0.5 * total and unknown <= 0.1 * total,
          "JIT frames not named: %d of %d under pfrJitWork, %d unnamed leaves"
          % (work, total, unknown))
    # the true split is 3:1 in CPU time (the workload keeps it on the process's CPU clock, which
    # also counts V8's helper threads: 3 points for those), within 4 standard errors of the
    # samples taken: ~240 give +-15 points; a host that left node a tenth of a CPU gave it 45
    # samples, +-29, which checks little more than the two being told apart. Under 25, nothing.
    n = (heavy + light) // ns
    tol = 3 + 400 * math.sqrt(0.75 * 0.25 / n) if n else 0
    check(n >= 25 and abs(100 * heavy / (heavy + light) - 75) <= tol,
          "pfrJitHeavy's share of the two: %d and %d samples, expected 75 +- %.1f%% (and 25 "
          "samples)" % (heavy // ns, light // ns, tol))
    m = re.search(r"^pfr_symbol_jit_frames_total (\S+)$", fetch_metrics(port), re.M)
    check(m and float(m.group(1)) > 0, "pfr_symbol_jit_frames_total: %s"
          % (m.group(0) if m else "missing"))


def test_metrics(args, tmp):
    """Prometheus metrics: the recorder's health and the Go allocation counters."""
    exe = os.path.join(args.workloads, "pfr-goheap-alloc")
    port = free_port()
    go = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) \
        if check(os.path.exists(exe), "%s not built" % exe) else None
    if go:
        check(go.stdout.readline().strip() == "ready", "pfr-goheap-alloc did not start")
    try:
        # a budget above the interval: on a loaded host (sanitizers, CPU hogs) half a second of
        # symbolizing per interval runs out, and frames past it go unnamed by design, where the
        # JIT check below wants to see them named
        rec = Recorder(args, tmp, ["--interval", "1", "--go-heap-profiler", "force",
                                   "--go-heap-interval", "1", "--scrape-local", "off",
                                   "--symbolize-budget", "30s", "--cpu-hz", str(METRICS_HZ),
                                   "--metrics-listen", "127.0.0.1:%d" % port])
        if go:
            time.sleep(2)
            go.stdin.write("phase\n")
            go.stdin.flush()
            go.stdout.readline()
        text = ""
        end = time.time() + 30
        want = ["pfr_cpu_samples_total", "pfr_store_bytes", "pfr_store_chunks_evicted_total",
                "pfr_store_chunks_lost_unshipped_total", "pfr_processes_symbolized_total",
                "pfr_cpu_samples_lost_total", 'pfr_symbol_files_refused_total{reason="too_big"}']
        if go:
            want.append('container_go_alloc_bytes_total{')
            want.append('pfr_goheap_files_refused_total{reason="bad_file"}')
        while time.time() < end:
            try:
                text = fetch_metrics(port)
            except OSError:
                text = ""
            if all(w in text for w in want) and (not go or go_alloc_bytes(text, go.pid) > 100e6):
                break
            time.sleep(1)
        for w in want:
            check(w in text, "metric %s missing" % w)
        m = re.search(r"^pfr_cpu_samples_total (\S+)$", text, re.M)
        check(m and float(m.group(1)) > 0, "pfr_cpu_samples_total not counting")
        # as root the daemon runs at nice -10, every thread (new processes must be snapshotted
        # before they exit) but the builder of unwind tables, background work at -5; the
        # notification thread and the builder are named
        nices, names = thread_nices(rec.proc.pid)
        want = [-5 if name == "pfr-unwind" else -10 for name in names]
        check(nices and nices == want, "thread nice values %r of threads %r" % (nices, names))
        check("pfr-notify" in names and "pfr-unwind" in names, "thread names %r" % names)
        # new processes are named from their mappings, not by a read of /proc/PID/exe
        m = re.search(r'^pfr_process_exe_lookups_total\{from="mappings"\} (\S+)$', text, re.M)
        check(m and float(m.group(1)) > 0, "no executable found in the mappings: %s" %
              (m.group(0) if m else "metric missing"))
        # where the kernel's BPF can walk a task's mappings, the exit of a sampled process
        # carries them (taken as its snapshot when it had none or only its loader's)
        subprocess.run(["sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"],
                       check=True)
        time.sleep(2.5)  # the exit is read at the next interval's drain (1 s)
        with open("/sys/kernel/btf/vmlinux", "rb") as f:
            iterator = b"bpf_iter_task_vma_new" in f.read()
        later = fetch_metrics(port)
        uses = re.findall(r'^pfr_process_exit_mappings_total\{use="(taken|unneeded)"\} (\S+)$',
                          later, re.M)
        check(len(uses) == 2, "pfr_process_exit_mappings_total: %r" % uses)
        if iterator:
            check(sum(float(v) for _, v in uses) > 0, "no exit carried mappings: %r" % uses)
            check_deferred(args, rec, port)
            check_dlopen(args, rec, port, tmp)
            check_overlay(args, rec, tmp)
        check_jit(args, rec, port, tmp)
        if go:
            # a phase allocates about 1.1 GB; the counter is the scaled estimate
            v = go_alloc_bytes(text, go.pid)
            check(v > 100e6, "container_go_alloc_bytes_total of pid %d: %r" % (go.pid, v))
        rc, _, _ = rec.stop()
        check(rc == 0, "recorder exit code %d" % rc)
    finally:
        if go:
            go.kill()
            go.wait()


def harness(prefix, run, args):
    """run(args, tmp, procs, mounts) in a new temporary folder (mode 755); then what it started
    is killed (procs in their order: servers first, their requests end with them; then the
    recorders) and its mounts lazily unmounted; an exception is a failure with its reason.
    Returns verdict(tmp)."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    os.chmod(tmp, 0o755)
    procs, mounts = [], []
    try:
        run(args, tmp, procs, mounts)
    except Exception as e:  # a crash of the harness is a failure with its reason
        FAILURES.append(repr(e))
        print("ERROR: %r" % e, flush=True)
    finally:
        kill_all(procs + LIVE)
        for m in mounts:
            subprocess.run(["umount", "-l", m], capture_output=True)
    return verdict(tmp)


def verdict(tmp):
    """The exit code of a test run in tmp: on failures the recorder's log tail is printed and
    tmp kept, else tmp is removed."""
    if FAILURES:
        logp = os.path.join(tmp, "recorder.log")
        if os.path.exists(logp):
            with open(logp) as f:
                print("---- recorder log (tail) ----\n" + "".join(f.readlines()[-40:]))
        print("%d failure(s); files kept in %s" % (len(FAILURES), tmp))
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")
    return 0


def run_in_tmp(test_fn, args, prefix):
    """test_fn(args, tmp) in a new temp dir; a crash of the harness is a failure with its
    reason. Returns the exit code (verdict)."""
    return harness(prefix, lambda a, tmp, procs, mounts: test_fn(a, tmp), args)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--recorder", required=True)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--workloads", required=True)
    ap.add_argument("--sanitized", action="store_true")
    ap.add_argument("--pfr", help="the query tool (the pins test)")
    ap.add_argument("test", choices=["profiles", "stress", "signals", "config", "goheap", "scrape",
                                     "metrics", "pins"])
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: needs root")
        return 77
    tmp = tempfile.mkdtemp(prefix="pfr-recorder-%s-" % args.test)
    try:
        globals()["test_" + args.test](args, tmp)
    except Exception as e:  # a crash of the harness is a failure with its reason
        FAILURES.append(repr(e))
        print("ERROR: %r" % e, flush=True)
    finally:
        kill_all(LIVE)
    return verdict(tmp)


if __name__ == "__main__":
    sys.exit(main())
