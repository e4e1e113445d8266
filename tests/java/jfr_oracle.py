#!/usr/bin/env python3
"""The JFR conversion against the JDK's own reader and against the workload's ground truth.

Records tests/java/workload/JfrWorkload.java with the JVM's own Flight Recorder
(-XX:StartFlightRecording, settings pfr-test.jfc), then:

  oracle        `jfr summary` counts every record type as pfr's parser does (jfr_dump counts),
                and `jfr print --json` of each chunk gives, for each of the five Java types, the
                same total per whole stack (function and line of every frame) as pfr's
                conversion with each chunk read alone (jfr_dump samples FILE alone), hence the
                same per-method totals: exactly.
  carry         pfr's conversion as the recorder makes it (an event whose stack only an
                earlier chunk's pools hold takes it from there) is the one above plus exactly
                the events it says it took a stack for (the workload's monitor waits span its
                rotations), no stack with less.
                A failing run keeps the recording and both sides' outputs in a directory of
                --work that it names (`jfr_dump events` lists pfr's events for a diff).
  ground truth  CPU hotMethod:coldMethod within 5 points of 75 %; allocated bytes of allocBig
                against allocSmall within 5 points of what the workload counted; the contended
                method in both lock types; jdk.ThreadPark left out of them.
  pprof         `go tool pprof -top` reads the encoded profiles and names the hot method.

usage: jfr_oracle.py --java JAVA --jfr JFR --classes DIR --jfc FILE --dump JFR_DUMP --go GO
                     --work DIR [--seconds N] [--recording FILE]
"""
import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import time

EVENTS = {
    # event: (profile, value field or None for one CPU period)
    "jdk.ExecutionSample": ("cpu", None),
    "jdk.ObjectAllocationSample": ("alloc", "weight"),
    "jdk.ObjectAllocationInNewTLAB": ("alloc", "tlabSize"),
    "jdk.ObjectAllocationOutsideTLAB": ("alloc", "allocationSize"),
    "jdk.JavaMonitorEnter": ("lock", "duration"),
}
CPU_PERIOD_NS = 10_000_000
FAILURES = []


def check(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg)
    if not cond:
        FAILURES.append(msg)


def run(cmd, keep=None, **kw):
    """cmd's stdout; keep: also written to that file (kept with the recording on failure)."""
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout
    if keep:
        with open(keep, "w") as f:
            f.write(out)
    return out


# What a failing run leaves for a diff by hand: the recording and what each side read of it.
KEPT = ["workload.jfr", "chunks", "jfr-summary.txt", "pfr-samples.txt", "pfr-samples-carry.txt",
        "pfr-counts.txt"]


def keep_failure(work):
    """Moves the run's files to a directory of their own, so that the next run keeps them."""
    dest = os.path.join(work, "failed-%s-%d" % (time.strftime("%Y%m%d-%H%M%S"), os.getpid()))
    os.makedirs(dest)
    for name in KEPT:
        if os.path.exists(os.path.join(work, name)):
            shutil.move(os.path.join(work, name), os.path.join(dest, name))
    print("kept the recording and both sides' outputs in " + dest)


# The renaming of generated classes that Coroot's agent applies (and pfr with it), written
# again from its description here so that the two sides do not share code.
ACCESSOR = re.compile(r"^(jdk/internal/reflect/GeneratedMethodAccessor)\d+$")
LAMBDA = re.compile(r"^(.+\$\$Lambda)(\$?\d*[./](0x)?[\da-f]+|\d+|\$?\d*\+0x[\da-f]+(/\d+)?)$")


def merge(name):
    name = ACCESSOR.sub(r"\1_", name)
    return LAMBDA.sub(r"\1_", name)


def iso_duration_ns(text):
    """'PT0.120201759S', 'PT1M2.5S', 'PT0S' -> integer nanoseconds, without floating point."""
    m = re.fullmatch(r"PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:\.(\d{1,9}))?S)?", text)
    if not m:
        raise ValueError("duration " + text)
    h, mi, s, frac = m.groups()
    ns = (int(h or 0) * 3600 + int(mi or 0) * 60 + int(s or 0)) * 10**9
    return ns + int((frac or "").ljust(9, "0"))


def split_chunks(jfr, recording, nchunks, work):
    """The recording's chunks, one file each (`jfr disassemble`), in file order.

    jfr print reads each chunk alone, because over a whole recording the JDK's reader lets one
    chunk's constant pool values leak into the next: its parser of a constant pool field in an
    event (EventValueConstantParser) keeps the last key it read and that key's value, and it
    is kept from chunk to chunk while the metadata does not change. The JVM writes events whose
    stack trace only the previous chunk's pools hold (a monitor enter that waited across a
    chunk rotation: its stack was taken when the wait began); the first such event of a type
    in a chunk, when its key is the one of the previous chunk's last event of that type, is
    printed with that event's stack, the others with none. The chunk's bytes do not hold that
    stack (jfr print of the chunk alone prints none) and pfr, reading chunks as the format
    defines them, self-contained, skips all of them. Read chunk by chunk, the two agree
    exactly (docs/java.md)."""
    cdir = os.path.join(work, "chunks")
    shutil.rmtree(cdir, ignore_errors=True)
    os.makedirs(cdir)
    if nchunks == 1:  # jfr disassemble refuses to split a file of one chunk
        shutil.copy(recording, os.path.join(cdir, "workload_0.jfr"))
    else:
        run([jfr, "disassemble", "--output", cdir, "--max-chunks", "1", recording])
    files = [f for f in os.listdir(cdir) if f.endswith(".jfr")]
    files.sort(key=lambda f: int(re.search(r"_(\d+)\.jfr$", f).group(1)))
    return [os.path.join(cdir, f) for f in files]


def oracle_samples(jfr, chunks):
    """(profile, stack) -> [values] from `jfr print --json` of every chunk."""
    events = []
    for chunk in chunks:
        out = run([jfr, "print", "--json", "--stack-depth", "2048", "--events",
                   ",".join(EVENTS), chunk], chunk[:-len(".jfr")] + ".json")
        events += json.loads(out)["recording"]["events"]
    totals = collections.defaultdict(lambda: [0, 0])
    kinds = collections.Counter()
    for ev in events:
        prof, field = EVENTS[ev["type"]]
        kinds[ev["type"]] += 1
        st = ev["values"].get("stackTrace")
        if not st:
            continue
        frames = []
        for fr in st["frames"]:
            m = fr.get("method")
            if not m:
                continue
            cls = merge((m.get("type") or {}).get("name") or "")
            frames.append("%s.%s:%d" % (cls, merge(m.get("name") or ""),
                                        max(fr.get("lineNumber", 0), 0)))
        if not frames:
            continue
        key = (prof, ";".join(frames))
        if prof == "cpu":
            totals[key][0] += CPU_PERIOD_NS
        elif prof == "alloc":
            totals[key][0] += 1
            totals[key][1] += int(ev["values"][field])
        else:
            totals[key][0] += 1
            totals[key][1] += iso_duration_ns(ev["values"][field])
    return totals, kinds


def pfr_samples(dump, recording, keep, alone=True):
    """pfr's conversion: totals per (profile, stack), and its counts. alone: each chunk read
    alone, as the JDK's reader reads it."""
    totals = collections.defaultdict(lambda: [0, 0])
    counts = None
    for line in run([dump, "samples", recording] + (["alone"] if alone else []),
                    keep).splitlines():
        if line.startswith("#"):
            f = line[1:].split()
            counts = dict(zip(f[::2], map(int, f[1::2])))
            continue
        prof, vals, stack = line.split("\t")
        v = [int(x) for x in vals.split(",")]
        t = totals[(prof, stack)]
        for i, x in enumerate(v):
            t[i] += x
    return totals, counts


def summary_counts(jfr, recording, keep):
    """Records per type, and the number of chunks."""
    counts = {}
    chunks = None
    seen_rule = False
    for line in run([jfr, "summary", recording], keep).splitlines():
        m = re.fullmatch(r"\s*Chunks: (\d+)\s*", line)
        if m and not seen_rule:
            chunks = int(m.group(1))
        if line.startswith("===="):
            seen_rule = True
            continue
        f = line.split()
        if seen_rule and len(f) == 3 and f[1].isdigit() and int(f[1]) > 0:
            counts[f[0]] = int(f[1])
    return counts, chunks


def dump_counts(dump, recording, keep):
    counts = {}
    for line in run([dump, "counts", recording], keep).splitlines():
        if not line.startswith("#"):
            name, n = line.split()
            counts[name] = int(n)
    return counts


def per_method(totals, prof, idx, top_only):
    acc = collections.Counter()
    for (p, stack), v in totals.items():
        if p != prof:
            continue
        names = [f.rsplit(":", 1)[0] for f in stack.split(";")]
        for name in (names[:1] if top_only else set(names)):
            acc[name] += v[idx]
    return acc


def share(totals, prof, idx, a, b):
    m = per_method(totals, prof, idx, top_only=False)
    x, y = m.get("JfrWorkload." + a, 0), m.get("JfrWorkload." + b, 0)
    return (100.0 * x / (x + y) if x + y else float("nan")), x, y


def record(args):
    rec = os.path.join(args.work, "workload.jfr")
    if os.path.exists(rec):
        os.unlink(rec)
    # attach refused: a recorder with java_profiler enabled (another test's, on this host)
    # would add pfr's recording to this JVM, and its dumps cut this recording's chunks
    out = run([args.java, "-Xmx256m", "-XX:+DisableAttachMechanism",
               "-XX:StartFlightRecording=filename=%s,settings=%s" % (rec, args.jfc),
               "-Xlog:jfr+startup=warning", "-cp", args.classes, "JfrWorkload",
               str(args.seconds)])
    m = re.search(r"cpu hot=(\d+) cold=(\d+)\s+alloc big=(\d+) small=(\d+)", out)
    if not m or "done" not in out:
        sys.exit("workload: no truth in its output: " + out)
    return rec, [int(x) for x in m.groups()]


def main():
    ap = argparse.ArgumentParser()
    for a in ("java", "jfr", "classes", "jfc", "dump", "go", "work"):
        ap.add_argument("--" + a, required=True)
    ap.add_argument("--seconds", type=int, default=8)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rec, (hot_ns, cold_ns, big, small) = record(args)
    print("recording %s: %d bytes; the workload spun hot=%d cold=%d ns, allocated big=%d "
          "small=%d bytes" % (rec, os.path.getsize(rec), hot_ns, cold_ns, big, small))

    # --- oracle: record counts per type
    kept = {name: os.path.join(args.work, name) for name in KEPT}
    want, nchunks = summary_counts(args.jfr, rec, kept["jfr-summary.txt"])
    got = dump_counts(args.dump, rec, kept["pfr-counts.txt"])
    for name in sorted(set(want) | set(got)):
        check(want.get(name) == got.get(name), "count %s: jfr summary %s, pfr %s"
              % (name, want.get(name), got.get(name)))

    # --- oracle: totals per stack and per method, every type
    chunks = split_chunks(args.jfr, rec, nchunks, args.work)
    otot, okinds = oracle_samples(args.jfr, chunks)
    ptot, pcounts = pfr_samples(args.dump, rec, kept["pfr-samples.txt"])
    print("pfr: %s" % pcounts)
    check(nchunks == len(chunks) == pcounts["chunks"], "chunks: jfr summary %s, jfr disassemble "
          "%d, pfr %d" % (nchunks, len(chunks), pcounts["chunks"]))
    for kind in EVENTS:
        print("  %s: %d events in jfr print" % (kind, okinds.get(kind, 0)))
    for prof, types in (("cpu", ["java:cpu:nanoseconds"]),
                        ("alloc", ["java:heap_alloc_objects:count", "java:heap_alloc_space:bytes"]),
                        ("lock", ["java:lock_contentions:count", "java:lock_delay:nanoseconds"])):
        okeys = {k for k in otot if k[0] == prof}
        pkeys = {k for k in ptot if k[0] == prof}
        check(okeys == pkeys, "%s: the same %d stacks (pfr %d; only in jfr print %d, only in "
              "pfr %d)" % (prof, len(okeys), len(pkeys), len(okeys - pkeys), len(pkeys - okeys)))
        diff = [k for k in okeys & pkeys if otot[k][:len(types)] != ptot[k][:len(types)]]
        check(not diff, "%s: equal values on every stack (%d differ%s)"
              % (prof, len(diff), ": %s %s %s" % (diff[0], otot[diff[0]], ptot[diff[0]])
                 if diff else ""))
        for i, t in enumerate(types):
            for top in (True, False):
                o, p = per_method(otot, prof, i, top), per_method(ptot, prof, i, top)
                what = "top frame" if top else "any frame"
                check(o == p, "%s per method (%s): %d methods, total %d" %
                      (t, what, len(o), sum(o.values()) if top else 0))
                if top:
                    for name, v in o.most_common(3):
                        print("       %-40s %d" % (name, v))
    check(pcounts["events"] == sum(want.get(k, 0) for k in want
                                   if k not in ("jdk.Metadata", "jdk.CheckPoint")),
          "pfr's event count is jfr summary's, less metadata and checkpoints")

    # --- carry: the recorder's conversion adds exactly the events it found an earlier stack for
    ctot, ccounts = pfr_samples(args.dump, rec, kept["pfr-samples-carry.txt"], alone=False)
    print("pfr, stacks of earlier chunks taken: %s" % ccounts)
    carried = ccounts["carried"]
    check(ccounts["skipped"] == pcounts["skipped"] - carried and
          sum(ccounts[k] - pcounts[k] for k in ("cpu", "alloc", "lock")) == carried,
          "carry: %d events of %d skipped alone took an earlier chunk's stack (%d left without)"
          % (carried, pcounts["skipped"], ccounts["skipped"]))
    added, less = 0, []
    for key in set(ctot) | set(ptot):
        c, p = ctot.get(key, [0, 0]), ptot.get(key, [0, 0])
        if c[0] < p[0] or c[1] < p[1]:
            less.append(key)
        added += (c[0] - p[0]) // (CPU_PERIOD_NS if key[0] == "cpu" else 1)
    check(not less, "carry: no stack has less than alone (%d have%s)"
          % (len(less), ": %s" % (less[0],) if less else ""))
    check(added == carried, "carry: %d samples more than alone, as many as carried (%d)"
          % (added, carried))

    # --- ground truth
    cpu, hot, cold = share(ptot, "cpu", 0, "hotMethod", "coldMethod")
    cpu_truth = 100.0 * hot_ns / (hot_ns + cold_ns)
    check(abs(cpu - cpu_truth) <= 5.0, "CPU hotMethod %.1f %% of hot+cold (truth %.1f %%, "
          "3:1 by design; %d and %d samples)"
          % (cpu, cpu_truth, hot // CPU_PERIOD_NS, cold // CPU_PERIOD_NS))
    truth = 100.0 * big / (big + small)
    got_alloc, gb, gs = share(ptot, "alloc", 1, "allocBig", "allocSmall")
    check(abs(got_alloc - truth) <= 5.0, "alloc bytes allocBig %.1f %% of big+small (truth "
          "%.1f %%; sampled %d of %d bytes)" % (got_alloc, truth, gb + gs, big + small))
    lock = [per_method(ptot, "lock", i, top_only=False) for i in (0, 1)]
    for i, t in enumerate(("java:lock_contentions:count", "java:lock_delay:nanoseconds")):
        check(lock[i].get("JfrWorkload.contendedMethod", 0) > 0,
              "%s: JfrWorkload.contendedMethod %d" % (t, lock[i].get("JfrWorkload.contendedMethod", 0)))
        check("JfrWorkload.parkedMethod" not in lock[i],
              "%s: jdk.ThreadPark (parkedMethod) left out, as Coroot's agent leaves it" % t)

    # --- pprof
    pdir = os.path.join(args.work, "pprof")
    os.makedirs(pdir, exist_ok=True)
    run([args.dump, "pprof", rec, pdir])
    env = dict(os.environ, GOCACHE=os.path.join(args.work, "gocache"), HOME=args.work)
    for name, sample, want_fn in (("cpu", "java:cpu:nanoseconds", "JfrWorkload.hotMethod"),
                                  ("alloc", "java:heap_alloc_space:bytes", "JfrWorkload.allocBig"),
                                  ("lock", "java:lock_delay:nanoseconds",
                                   "JfrWorkload.contendedMethod")):
        top = run([args.go, "tool", "pprof", "-top", "-cum", "-sample_index=" + sample,
                   os.path.join(pdir, name + ".pb.gz")], env=env)
        check(want_fn in top, "go tool pprof -top %s.pb.gz names %s" % (name, want_fn))

    print("%d failures" % len(FAILURES))
    if FAILURES:
        keep_failure(args.work)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
