#!/usr/bin/env python3
"""Python frames in the CPU profile (issue 34), against Debian's python3.11: the real recorder
samples the host while py_truth.py runs each of its modes; its ring is read back with
recorder_store_dump (frames leaf first, Python frames in module "python" with file and line).

Usage: python_itest.py --recorder BIN --dump BIN --python /usr/bin/python3.11 --workload PY
                      [--also OTHER_PYTHON]...

--also: other interpreters (pyenv's 3.8, 3.9, 3.10, 3.12 and 3.13 where the build found them)
run every workload after --python, under the same recorder, with the same checks. (3.8-3.10
code objects have no co_qualname: their frames are named by co_name, so the event loop's frame
is "_run_once" there, "BaseEventLoop._run_once" from 3.11 on.)

Checks (the issue's ground truth):
  split    hot_a or hot_b on >= 95 % of the main thread's samples; hot_a's share of the two
           within 5 points of its share of the work (calls of random lengths, three of hot_a
           for one of hot_b), and within 5 points of the share its in-process oracle saw (a profiling timer whose handler looks at
           the main thread with sys._current_frames()); every hot_a/hot_b frame on a line of its body and its
           caller's frame on the line of the call
  recurse  the samples in spin() have every rec() level up to the depth limit: the rec frames
           are contiguous and either reach recurse() or fill the stack to its limit
  sorted   keyfn() under native frames (the sort) under use_sorted(): Python -> C -> Python
  thread   samples in SHA-256 (hashlib, the GIL released) name hash_worker and never
           main_spin (the thread holding the GIL); main_spin's never name hash_worker
  gen      the samples in gen_hot (a generator) have gen_consumer, on the line of its next(),
           as their caller
  asyncio  the samples in crunch have the task awaiting it (worker_a or worker_b, on the line
           of its await) as their caller and the event loop (BaseEventLoop._run_once) further
           out; both tasks show
Prints the sampler's cost per sample of the Python processes: native walk and interpreter frames.
Exit 0 = pass, 1 = fail.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import py_harness as ph  # noqa: E402

# CPU seconds of each mode's program: ~400 samples at 99 Hz where the checks need 100; the
# thread mode's two threads share its process's CPU time, so it gets twice that.
SECONDS = 4
THREAD_SECONDS = 8
# The split's program runs for 15 s of CPU time: ~1500 samples, so that its share's standard
# error (about 1.1 points) is a fifth of the 5 points allowed.
SPLIT_SECONDS = 15
HZ = 99
PERIOD_NS = 1e9 / HZ
MAX_STACK_DEPTH = 127  # PFR_MAX_STACK_DEPTH: user frames kept per stack

FAILS = []


def check(cond, msg):
    print(("ok    " if cond else "FAIL  ") + msg, flush=True)
    if not cond:
        FAILS.append(msg)
    return cond


def marked_lines(path):
    """Source lines by their "# L:name" marker."""
    out = {}
    with open(path) as f:
        for i, line in enumerate(f, 1):
            m = re.search(r"# L:(\w+)", line)
            if m:
                out.setdefault(m.group(1), set()).add(i)
    return out


def body_lines(path, func):
    """The lines of def func's body."""
    lines = open(path).read().split("\n")
    start = next(i for i, l in enumerate(lines, 1) if l.startswith("def %s(" % func))
    end = start
    while end < len(lines) and (lines[end].startswith(" ") or not lines[end].strip()):
        end += 1
    return set(range(start, end + 1))


def samples_by_pid(dump, store, pids):
    """The samples of each of pids in the store, one entry per sample (its frames), from one
    read of the store: a read of a host's store takes tens of seconds, and reading it once per
    check (36 with six interpreters) took most of recorder_python_versions' time."""
    r = subprocess.run([dump, store, "--samples"], capture_output=True, text=True, check=True)
    out = {pid: [] for pid in pids}
    for line in r.stdout.splitlines():
        chunk = json.loads(line)
        for s in chunk.get("samples", []):
            if s.get("pid") in out:
                # value = samples x the period
                out[s["pid"]].extend([s["frames"]] * max(1, round(s["value"] / PERIOD_NS)))
    return out


def samples_of(dump, store, pid):
    return samples_by_pid(dump, store, [pid])[pid]


def names(frames):
    return [f["function"] for f in frames]


def py_frames(frames):
    return [f for f in frames if f["module"] == "python"]


def check_split(samples, splits, src, file_as=None):
    """splits: what the program printed (splits_printed); src: the workload's source; file_as:
    its path as the program named it (default src)."""
    work, own, oracle = splits
    # the program's samples, not those of its oracle's handler
    samples = [s for s in samples if "oracle_sampler" not in names(s)]
    n = len(samples)
    a = sum(1 for s in samples if "hot_a" in names(s))
    b = sum(1 for s in samples if "hot_b" in names(s))
    check(n >= 1000, "split: %d samples (>= 1000)" % n)
    if n == 0:
        return
    check((a + b) * 100.0 / n >= 95.0,
          "split: hot_a or hot_b on %.1f %% of the samples (>= 95)" % ((a + b) * 100.0 / n))
    share = a * 100.0 / max(1, a + b)
    check(abs(share - work) <= 5.0,
          "split: hot_a %.1f %% of hot_a+hot_b, %.1f %% of the work (within 5 points; the "
          "program timed %.1f %%)" % (share, work, own))
    check(abs(share - oracle) <= 5.0,
          "split: hot_a %.1f %% of hot_a+hot_b, the in-process oracle saw %.1f %% (within 5 "
          "points)" % (share, oracle))
    marks = marked_lines(src)
    body = {"hot_a": body_lines(src, "hot_a"), "hot_b": body_lines(src, "hot_b")}
    call = {"hot_a": marks["call_a"], "hot_b": marks["call_b"]}
    good = total = 0
    bad_examples = []
    for s in samples:
        pf = py_frames(s)
        for i, f in enumerate(pf[:-1]):
            if f["function"] in body:
                total += 1
                caller = pf[i + 1]
                ok = (f["line"] in body[f["function"]] and caller["function"] == "split"
                      and caller["line"] in call[f["function"]] and f["file"] == (file_as or src))
                good += ok
                if not ok and len(bad_examples) < 3:
                    bad_examples.append((f, caller))
    check(total > 0 and good == total,
          "split: %d of %d hot_a/hot_b frames on a line of their body, called from the line of "
          "the call%s" % (good, total, "" if good == total else " e.g. %s" % bad_examples))


def check_recurse(samples, src):
    marks = marked_lines(src)
    in_spin = [s for s in samples if "spin" in names(py_frames(s))]
    whole = 0
    for s in in_spin:
        pf = py_frames(s)
        i = names(pf).index("spin")
        recs = 0
        while i + 1 + recs < len(pf) and pf[i + 1 + recs]["function"] == "rec":
            recs += 1
        rest = pf[i + 1 + recs:]
        lines_ok = all(f["line"] in marks["rec"] for f in pf[i + 2:i + 1 + recs])
        reached = bool(rest) and rest[0]["function"] == "recurse" and recs == 200
        cut = not rest and len(s) >= MAX_STACK_DEPTH - 1
        whole += lines_ok and (reached or cut)
    n = len(in_spin)
    check(n >= 100, "recurse: %d samples in spin() (>= 100)" % n)
    check(n > 0 and whole * 100.0 / n >= 95.0,
          "recurse: %d of %d samples keep every rec() level, on the line of the call, up to the "
          "depth limit (>= 95 %%)" % (whole, n))


def check_sorted(samples):
    in_key = [s for s in samples if "keyfn" in names(s)]
    good = 0
    for s in in_key:
        ns = names(s)
        k = ns.index("keyfn")
        if "use_sorted" not in ns[k:]:
            continue
        u = ns.index("use_sorted", k)
        between = [f for f in s[k + 1:u] if f["module"] != "python"]
        good += len(between) >= 2 and "_PyEval_EvalFrameDefault" in names(between)
    n = len(in_key)
    check(n >= 100, "sorted: %d samples in keyfn() (>= 100)" % n)
    ok = check(n > 0 and good * 100.0 / n >= 95.0,
               "sorted: %d of %d keyfn() samples are Python -> C -> Python (use_sorted, the "
               "sort's native frames, keyfn) (>= 95 %%)" % (good, n))
    if not ok and n:
        # a native walk cut at the interpreter (its unwind table missing: frame pointers, which
        # libpython does not keep) leaves 1-3 native frames and the Python frames unplaced
        native = sorted(len([f for f in s if f["module"] not in ("python", "[kernel]")])
                        for s in in_key)
        print("      the keyfn() samples' native user frames: median %d, %d of %d with at most 3"
              % (native[n // 2], sum(k <= 3 for k in native), n))


def check_thread(samples):
    sha = [s for s in samples if any("sha256" in n.lower() for n in names(s))]
    good = sum(1 for s in sha if "hash_worker" in names(s) and "main_spin" not in names(s))
    check(len(sha) >= 50, "thread: %d samples in SHA-256 (>= 50)" % len(sha))
    check(sha and good * 100.0 / len(sha) >= 95.0,
          "thread: %d of %d SHA-256 samples (GIL released) name hash_worker, not main_spin "
          "(>= 95 %%)" % (good, len(sha)))
    spin = [s for s in samples if "main_spin" in names(s)]
    check(len(spin) >= 50 and not any("hash_worker" in names(s) for s in spin),
          "thread: %d main_spin samples, none naming hash_worker" % len(spin))


def caller_of(samples, callee, callers, lines):
    """Of the samples whose Python frames have callee: how many have one of callers, on one of
    lines, as the next Python frame; and how many there were."""
    n = good = 0
    for s in samples:
        pf = py_frames(s)
        ns = names(pf)
        if callee not in ns:
            continue
        n += 1
        i = ns.index(callee)
        good += (i + 1 < len(pf) and pf[i + 1]["function"] in callers
                 and pf[i + 1]["line"] in lines)
    return good, n


def check_gen(samples, src):
    marks = marked_lines(src)
    good, n = caller_of(samples, "gen_hot", ("gen_consumer",), marks["gen_next"])
    check(n >= 100, "gen: %d samples in gen_hot() (>= 100)" % n)
    check(n > 0 and good * 100.0 / n >= 95.0,
          "gen: %d of %d gen_hot() samples called from gen_consumer's next() (>= 95 %%)"
          % (good, n))


def check_asyncio(samples, src, qualnames):
    marks = marked_lines(src)
    good, n = caller_of(samples, "crunch", ("worker_a", "worker_b"),
                        marks["await_a"] | marks["await_b"])

    def run_once(name):
        return name.endswith("._run_once") if qualnames else name == "_run_once"
    loop = sum(1 for s in samples if "crunch" in names(s) and any(map(run_once, names(s))))
    a = sum(1 for s in samples if "worker_a" in names(s))
    b = sum(1 for s in samples if "worker_b" in names(s))
    check(n >= 100, "asyncio: %d samples in crunch() (>= 100)" % n)
    check(n > 0 and good * 100.0 / n >= 95.0 and loop * 100.0 / n >= 95.0,
          "asyncio: %d of %d crunch() samples awaited from worker_a/worker_b's await, %d under "
          "the event loop's _run_once (>= 95 %%)" % (good, n, loop))
    check(min(a, b) * 100.0 / max(1, a + b) >= 25.0,
          "asyncio: both tasks show (worker_a %d, worker_b %d samples)" % (a, b))


def has_qualnames(python):
    """Whether the interpreter's code objects have co_qualname (3.11+)."""
    r = subprocess.run([python, "-c", "import sys; print(sys.version_info >= (3, 11))"],
                       capture_output=True, text=True, check=True)
    return r.stdout.strip() == "True"


def start_recorder(recorder, tmp):
    """The recorder these tests run, writing tmp/ring.db and its log tmp/recorder.log, once it
    samples: (process, store, log path, log file); process None when it did not start (said)."""
    store = os.path.join(tmp, "ring.db")
    logpath = os.path.join(tmp, "recorder.log")
    logf = open(logpath, "w")
    rec = subprocess.Popen([recorder, "--store", store, "--interval", "2", "--cpu-hz", str(HZ),
                            "--symbolize-budget", "600", "--metrics-listen", "off",
                            "--go-heap-profiler", "disabled", "--scrape-local", "off",
                            "--python-frames", "enabled", "--log-level", "debug"],
                           stdout=logf, stderr=subprocess.STDOUT)
    end = time.time() + 60
    while ": sampling with" not in open(logpath).read():
        if rec.poll() is not None or time.time() > end:
            print("FAIL  the recorder did not start:\n" + open(logpath).read()[-3000:])
            stop_recorder(rec, logf)
            return None, store, logpath, logf
        time.sleep(0.05)
    return rec, store, logpath, logf


def stop_recorder(rec, logf):
    if rec and rec.poll() is None:
        rec.send_signal(signal.SIGTERM)
        rec.wait(timeout=60)
    logf.close()


def splits_printed(out):
    """The split program's splits, from what it printed: of the work, as it timed itself, as
    its oracle saw."""
    return tuple(float(re.search(r"%s split a/\(a\+b\) ([\d.]+)" % what, out).group(1))
                 for what in ("work", "own", "oracle"))


def main():
    args = ph.parse_args("--also")
    if not args:
        return 1
    pythons = [args.python] + args.also
    tmp = tempfile.mkdtemp(prefix="pfr-python-")
    rec, store, logpath, logf = start_recorder(args.recorder, tmp)
    pids, splits = {}, {}
    try:
        if not rec:
            return 1
        for py in pythons:
            for mode in ("split", "recurse", "sorted", "thread", "gen", "asyncio"):
                secs = {"split": SPLIT_SECONDS, "thread": THREAD_SECONDS}.get(mode, SECONDS)
                p = subprocess.Popen([py, args.workload, mode, str(secs)],
                                     stdout=subprocess.PIPE, text=True)
                out, _ = p.communicate(timeout=240)
                pids[py, mode] = p.pid
                if mode == "split":
                    splits[py] = splits_printed(out)
        time.sleep(2.5)  # the last interval
    finally:
        stop_recorder(rec, logf)
    log = open(logpath).read()
    costs = re.findall(r"python: samples=(\d+).*bpf_ns_per_sample\{native=(\d+) python=(\d+)\}",
                       log)
    if costs:
        n, nat, py = costs[-1]
        print("cost: %s samples of Python processes, sampler per sample: native walk %s ns, "
              "interpreter frames %s ns" % (n, nat, py))
    check(bool(costs), "the recorder logged its Python figures")
    src = os.path.realpath(args.workload)
    got = samples_by_pid(args.dump, store, pids.values())
    for py in pythons:
        m = re.search(r"python: walking process %d \(([^)]*)\)" % pids[py, "split"], log)
        print("== %s: %s" % (py, m.group(1) if m else "not walked"))
        check_split(got[pids[py, "split"]], splits[py], src)
        check_recurse(got[pids[py, "recurse"]], src)
        check_sorted(got[pids[py, "sorted"]])
        check_thread(got[pids[py, "thread"]])
        check_gen(got[pids[py, "gen"]], src)
        check_asyncio(got[pids[py, "asyncio"]], src, has_qualnames(py))
    if FAILS:
        print("recorder log tail:\n" + log[-2000:])
        print("%d check(s) failed" % len(FAILS))
        return 1
    print("all checks passed")
    shutil.rmtree(tmp, ignore_errors=True)  # kept on failure, to look at
    return 0


if __name__ == "__main__":
    sys.exit(main())
