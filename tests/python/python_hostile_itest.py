#!/usr/bin/env python3
"""Python frames against hostile input (issue 34, "Bad input"), under the real recorder:

  py_hostile      a C program mapping a fake libpython3.11.so whose _PyRuntime, thread list,
                  frames and code objects lie (cycles, wild and kernel pointers, names of 2^40
                  characters, line tables of random bytes, code objects unmapped between the
                  sample and the drain, a thread rewriting its frames as they are read)
  py_truth churn  a real python3.11 whose code objects are freed and their memory reused all
                  the time
  py_truth split  a real python3.11 beside them, still named right

Checks: the recorder stays up and writes every interval on time while they run; the hostile
process is sampled, its good frames named (hostile_ok called from hostile_caller: the walk did
reach it), the rest "[python: unreadable]" or one of its own names, never a name over 1024
characters; the churn's Python frames are its own functions or unreadable; the split program
is named as always; SIGTERM stops the recorder with exit 0.

Samples are counted one by one (a stack's entry in the ring holds its count).

Usage: python_hostile_itest.py --recorder BIN --dump BIN --python PY --workload PY
       --hostile BIN [--sanitized]
"""
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recorder"))
import recorder_itest as ri  # noqa: E402  (its Recorder, dump, lateness and checks)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import py_harness as ph  # noqa: E402

INTERVAL = 1
HOSTILE_CPU_SECONDS = 3  # ~300 samples at 99 Hz
UNREADABLE = "[python: unreadable]"
HOSTILE_NAMES = {"hostile_ok", "hostile_caller", "hostile_freed", "hostile_reused",
                 "hostile_badlines", UNREADABLE}


WORK = {"hot_a", "hot_b", "split"}  # the split program's functions


def py_frames(s):
    return [f for f in s["frames"] if f["module"] == "python"]


def run(args, tmp, procs, mounts):
    env = {"ASAN_OPTIONS": "detect_leaks=0"} if args.sanitized else None
    rec = ri.Recorder(args, tmp, ["--interval", str(INTERVAL), "--cpu-hz", "99",
                                  "--log-level", "debug", "--python-frames", "enabled",
                                  "--metrics-listen", "off", "--go-heap-profiler", "disabled",
                                  "--scrape-local", "off"], env)
    # the hostile program runs for CPU time (as many samples however busy the machine), the
    # others until it is done
    hostile = subprocess.Popen([args.hostile, str(HOSTILE_CPU_SECONDS)], stdout=subprocess.PIPE,
                               text=True)
    # the churn runs a copy of the workload under a name of its own: a frame of another
    # process's file in its samples would be a name read from the wrong process
    churn_src = os.path.join(tmp, "churn_truth.py")
    shutil.copy(args.workload, churn_src)
    churn = subprocess.Popen([args.python, churn_src, "churn", "600"])
    split = subprocess.Popen([args.python, args.workload, "split", "600"],
                             stdout=subprocess.DEVNULL)
    procs += [hostile, churn, split]
    time.sleep(INTERVAL + 1.5)  # the first interval (a cold cache: it may run long)
    slack = 2.0 if args.sanitized else 1.0
    worst = looks = 0
    end = time.time() + 30 * HOSTILE_CPU_SECONDS
    while hostile.poll() is None and time.time() < end:
        w, n = ri.lateness(args, rec.store, INTERVAL, 2)
        worst, looks = max(worst, w), looks + n
    ri.log("%d looks while they ran: the newest interval was at worst %.2f s late"
           % (looks, worst))
    ri.check(worst <= slack, "an interval was written %.2f s late" % worst)
    out, _ = hostile.communicate(timeout=60)
    ri.log(out.strip())
    ri.check(hostile.returncode == 0, "py_hostile exited %d" % hostile.returncode)
    for p in (churn, split):
        p.kill()
        p.wait()
    time.sleep(INTERVAL + 1.5)  # the last interval
    ri.check(rec.proc.poll() is None, "the recorder died")
    rc, secs, _ = rec.stop(timeout=30)
    ri.log("SIGTERM: exit %d after %.2f s" % (rc, secs))
    ri.check(rc == 0, "recorder exit code %d" % rc)
    log = rec.log_text()
    ri.check("walking process %d " % hostile.pid in log, "the hostile process was not walked")

    chunks = ri.dump(args, rec.store)
    hs = ph.samples(chunks, hostile.pid)
    pyf = [f for s in hs for f in py_frames(s)]
    good = sum(1 for s in hs if [f["function"] for f in py_frames(s)][:2] ==
               ["hostile_ok", "hostile_caller"])
    unreadable = sum(1 for f in pyf if f["function"] == UNREADABLE)
    strange = {f["function"][:80] for f in pyf if f["function"] not in HOSTILE_NAMES}
    longest = max((len(f["function"]) + len(f["file"]) for f in pyf), default=0)
    ri.log("hostile: %d samples, %d Python frames, %d samples hostile_ok <- hostile_caller, "
           "%d frames unreadable, longest name+file %d" % (len(hs), len(pyf), good, unreadable,
                                                           longest))
    ri.check(len(hs) >= 200, "hostile: %d samples (>= 200)" % len(hs))
    ri.check(good >= 15, "hostile: the good chain named in %d samples (>= 15)" % good)
    ri.check(unreadable >= 30, "hostile: %d frames unreadable (>= 30)" % unreadable)
    ri.check(not strange, "hostile: frames named %r" % sorted(strange)[:5])
    ri.check(longest <= 2 * 1024 * 4, "hostile: a name and file of %d bytes" % longest)

    # the churn's frames of its own code (its file, or "<string>" for the functions it
    # compiles) name its own functions, but for a code object freed between the sample and
    # the drain whose address another took: named as that one (docs/python.md, known limits;
    # the start-up's imports free theirs), at most 1 % of them; never a frame of another
    # process's file
    cs = ph.samples(chunks, churn.pid)
    mine = [f["function"] for s in cs for f in py_frames(s) if f["file"] in (churn_src, "<string>")]
    others = [f["function"] for s in cs for f in py_frames(s)
              if f["file"] == os.path.realpath(args.workload)]
    churn_named = sum(1 for n in mine if n.startswith("churn_"))
    reused = [n for n in mine if not (n.startswith("churn") or n == "<module>")]
    ri.log("churn: %d samples, %d Python frames of its own code (%d in churn_N), %d named as "
           "another of its functions %r" % (len(cs), len(mine), churn_named, len(reused),
                                             sorted(set(reused))[:5]))
    ri.check(len(cs) >= 100 and churn_named >= len(cs) // 2,
             "churn: %d samples, %d of them in churn_N" % (len(cs), churn_named))
    ri.check(len(reused) * 100 <= len(mine), "churn: %d of %d frames named as another of its "
             "functions (freed code objects' addresses reused: <= 1 %%)" % (len(reused), len(mine)))
    ri.check(not others, "churn: %d frames named from another process's file" % len(others))

    # not the samples of its oracle's handler, nor those of its start-up, which name other
    # Python code (imports, the regular expressions they compile: ~20 samples, 7-12 % of its
    # ~300 when two CPU hogs share the machine and its work gets less of it). Its work is named
    # right when the innermost Python frame is hot_a, hot_b or split itself (its loop between
    # them: timing calls, additions, ~3 % of the samples); a sample whose Python frames are
    # missing, unreadable or named otherwise counts against it
    def named(s):
        return [f["function"] for f in py_frames(s) if f["function"] != UNREADABLE]
    ss = [s for s in ph.samples(chunks, split.pid)
          if "oracle_sampler" not in named(s) and ("split" in named(s) or not named(s))]
    hot = sum(1 for s in ss if py_frames(s) and py_frames(s)[0]["function"] in WORK)
    ri.check(len(ss) >= 100 and hot * 100 >= 95 * len(ss),
             "split beside them: %d of %d samples of its work in hot_a, hot_b or split (>= 95 %%)"
             % (hot, len(ss)))


def main():
    args = ph.parse_args("--hostile", "--sanitized")
    return ph.harness("pfr-pyhostile-", run, args) if args else 1

if __name__ == "__main__":
    sys.exit(main())
