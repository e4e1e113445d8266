#!/usr/bin/env python3
"""Unwind tables read back from the cache on disk after a restart, under the real recorder.

Usage: unwind_cache_itest.py --recorder BIN --query BIN --cc GCC

A library of 60k unwind rows (30k filler functions of one FDE each, made at test time, and a
call chain built -O2 -fomit-frame-pointer: big_chain_a -> big_chain_b -> big_leaf), and a driver
(also without frame pointers) that dlopens it and runs the chain. The recorder runs with a cache
directory of the test's; the driver runs, its library's table is built and written there; the
recorder is stopped and started again (a fresh process: empty kernel maps) and the driver runs
again: its library's table must come back from the cache ("read from the cache" in the debug
log), not from a second build, and its stacks must be whole: of the samples in big_leaf of the
intervals after the table came, at least CHAIN_MIN percent have big_chain_b -> big_chain_a -> main above it (a frame-pointer walk gets
none: the code has no frame pointers). Eviction from the kernel's map and the read back is
unwinder_cache_test's (over real BPF maps, with no other program's tables in the way).
Exit 0 = pass, 1 = fail. There is no skip: a missing tool is a failure.
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

# FDEs of two rows each: 300k rows a library, past the cache's 32k. The map holds 524k rows
# (4 MiB): never both libraries, and one beside up to 224k rows of the host's other programs in use
# (tables in use are never evicted: a host whose programs use more gives A no room)
# FDEs of two rows each: 60k rows, past the cache's 32k; within the unwinder's small limits (32k
# FDEs), so that its build does not wait for another program's large one
FILLER = 30000
RUN_S = 4.5  # each run of the driver once its table is in place: two whole 2 s intervals
WAIT_S = 60  # for its table, at most (a loaded host's recorder has other tables to build first)
# Of the run whose table was read back (in ~5 ms): as unwind_itest's programs.
CHAIN_MIN = 90.0
HZ = 997

CHAIN_C = r"""
static volatile unsigned long sink;
__attribute__((noinline)) unsigned long big_leaf(unsigned long x)
{
    for (int i = 0; i < 20000; i++)
        x = x * 6364136223846793005ul + VARIANT;
    return x;
}
__attribute__((noinline)) unsigned long big_chain_b(unsigned long x)
{
    volatile unsigned long pad[3] = {x, x + 1, x + 2};
    return big_leaf(pad[1]) + pad[2];
}
__attribute__((noinline)) unsigned long big_chain_a(unsigned long x)
{
    volatile unsigned long pad[5] = {x, x, x, x, x};
    return big_chain_b(pad[3]) ^ pad[4];
}
"""

DRIVER_C = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static volatile unsigned long sink;
int main(int argc, char **argv)
{
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    unsigned long (*a)(unsigned long) = (unsigned long (*)(unsigned long))dlsym(h, "big_chain_a");
    double secs = atof(argv[2]);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        for (int i = 0; i < 100; i++)
            sink += a(sink + (unsigned long)i);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
    return 0;
}
"""

FAILURES = []


def log(msg):
    print(msg, flush=True)


def check(cond, msg):
    log(("ok   " if cond else "FAIL ") + msg)
    if not cond:
        FAILURES.append(msg)


def filler_asm(n, prefix):
    out = [".text"]
    for i in range(n):
        out.append(".globl %s%d\n%s%d:\n.cfi_startproc\n\tpush %%rbp\n.cfi_adjust_cfa_offset 8\n"
                   "\tpop %%rbp\n.cfi_adjust_cfa_offset -8\n\tret\n.cfi_endproc" %
                   (prefix, i, prefix, i))
    return "\n".join(out) + "\n"


def build(cc, tmp):
    flags = ["-O2", "-fomit-frame-pointer"]
    with open(os.path.join(tmp, "chain.c"), "w") as f:
        f.write(CHAIN_C)
    with open(os.path.join(tmp, "driver.c"), "w") as f:
        f.write(DRIVER_C)
    asm = os.path.join(tmp, "filler.s")
    with open(asm, "w") as f:
        f.write(filler_asm(FILLER, "uwc_fill_"))
    lib = os.path.join(tmp, "libpfruwc.so")
    subprocess.run([cc] + flags + ["-fPIC", "-shared", "-DVARIANT=1442695040888963407ul", "-o",
                                   lib, os.path.join(tmp, "chain.c"), asm], check=True)
    driver = os.path.join(tmp, "pfr-uwc-driver")
    subprocess.run([cc] + flags + ["-o", driver, os.path.join(tmp, "driver.c"), "-ldl"],
                   check=True)
    return driver, lib


def stacks(args, store, pid, t0, t1):
    cmd = [args.query, "--store", store, "flame", "--format", "folded", "--from", "@%d" % t0,
           "--to", "@%d" % t1, "--service", "pfr-uwc-driver", "--label", "pid=%d" % pid]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd), r.stderr.strip()[-500:]))
    out = []
    for line in r.stdout.splitlines():
        frames, _, value = line.rstrip().rpartition(" ")
        if frames:
            out.append((frames.split(";"), int(value)))
    return out


def chain_share(st):
    """Of the samples in big_leaf: (count, percent with big_chain_b, big_chain_a, main above)."""
    leaf = whole = 0
    for frames, n in st:
        if not frames or frames[-1] != "big_leaf":
            continue
        leaf += n
        if frames[-4:] == ["main", "big_chain_a", "big_chain_b", "big_leaf"]:
            whole += n
    return leaf, (100.0 * whole / leaf if leaf else 0.0)


class Recorder:
    def __init__(self, args, tmp, n):
        self.logpath = os.path.join(tmp, "recorder%d.log" % n)
        self.logf = open(self.logpath, "w")
        cmd = [args.recorder, "--store", os.path.join(tmp, "ring.db"), "--interval", "2",
               "--cpu-hz", str(HZ), "--unwind", "dwarf",
               "--unwind-cache-dir", os.path.join(tmp, "cache"),
               "--symbolize-budget", "600", "--metrics-listen", "off",
               "--go-heap-profiler", "disabled", "--scrape-local", "off", "--log-level", "debug"]
        log("starting: " + " ".join(cmd))
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT)
        end = time.time() + 60
        while ": sampling with" not in self.text():
            if self.proc.poll() is not None or time.time() > end:
                self.proc.kill()
                raise RuntimeError("recorder did not start sampling; log:\n" + self.text())
            time.sleep(0.05)

    def text(self):
        with open(self.logpath) as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=60)
        self.logf.close()
        return rc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--recorder", required=True)
    ap.add_argument("--query", required=True)
    ap.add_argument("--cc", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="pfr-uwcache-")
    t = time.time()
    driver, lib = build(args.cc, tmp)
    log("library made in %.1f s" % (time.time() - t))
    texts, last = [], None
    for n in (1, 2):
        rec = Recorder(args, tmp, n)
        try:
            p = subprocess.Popen([driver, lib, str(WAIT_S + 2 * RUN_S)])
            end = time.time() + WAIT_S
            while "unwind table of " + lib not in rec.text() and time.time() < end:
                time.sleep(0.05)
            t_in = time.time()
            time.sleep(RUN_S)
            p.kill()
            p.wait(timeout=60)
            last = (p.pid, t_in, time.time())
        finally:
            rc = rec.stop()
        check(rc == 0, "recorder %d exited 0 (%d)" % (n, rc))
        lines = [l for l in rec.text().splitlines() if "unwind table of " + lib in l]
        for l in lines:
            log("  " + l.strip()[-200:])
        want = "built in" if n == 1 else "read from the cache"
        check(len(lines) == 1 and want in lines[0],
              "recorder %d: the library's table %s" % (n, want.replace(" in", "")))
        texts.append(rec.text())
    files = sorted(os.listdir(os.path.join(tmp, "cache")))
    check(any(f.endswith(".uwt") for f in files), "the cache holds table files (%s)" % files)
    st = os.stat(os.path.join(tmp, "cache"))
    check(st.st_mode & 0o777 == 0o700, "the cache directory is 0700 (%o)" % (st.st_mode & 0o777))
    pid, t0, t1 = last
    # the intervals (2 s, on the wall clock) that began after the table came
    leaf, share = chain_share(stacks(args, os.path.join(tmp, "ring.db"), pid,
                                     (int(t0) // 2 + 1) * 2, int(t1) + 1))
    check(leaf > 0 and share >= CHAIN_MIN,
          "after the restart: %.2f s in big_leaf, %.1f%% with its whole chain (>= %.0f)"
          % (leaf / 1e9, share, CHAIN_MIN))
    if FAILURES:
        log("last recorder log tail:\n" + "\n".join(texts[-1].splitlines()[-30:]))
        return 1
    subprocess.run(["rm", "-rf", tmp])
    return 0


if __name__ == "__main__":
    sys.exit(main())
