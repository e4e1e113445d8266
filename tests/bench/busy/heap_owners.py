#!/usr/bin/env python3
"""Where the recorder's heap goes on a busy host: the busy-host bench's load (bench_busy_host.py:
a -j2 build of pfr and headless Chromium) with the recorder (default settings, its own ring)
run under heaptrack for --seconds, then the heap at each call site's own peak, grouped by its
owner (the innermost frame that names one of OWNERS), and heaptrack's peak heap in all.

Usage (as root): heap_owners.py --recorder BIN [--source DIR] [--seconds 150] [--out FILE.zst]
Needs heaptrack (Debian: heaptrack). Exit 77 when the host cannot run it.
"""
import argparse
import collections
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE]
import bench_busy_host as bb  # noqa: E402
import recorder_itest as ri  # noqa: E402

# substrings of function or file names, in the order they are tried on each frame
OWNERS = (("store_write", "ring writer: per-stream tables"), ("sqlite3", "SQLite"),
          ("frame_cache", "frame cache"), ("profile_builder", "CPU profile builder"),
          ("cpu_profiler", "CPU profiler: drained stacks"), ("pfr_map", "hash maps (pfr_map)"),
          ("sym_", "symbol cache"), ("symbolizer", "symbol cache"), ("unwind", "unwinder"),
          ("process_info", "process records"), ("identity", "identities"),
          ("goheap", "Go heap source"), ("scrape", "scraper"), ("bpf_object", "libbpf"))


def owner_of(stack):
    for frame in reversed(stack.split(";")):
        for key, name in OWNERS:
            if key in frame:
                return name
    return "other"


def by_owner(folded):
    out = collections.Counter()
    with open(folded) as f:
        for line in f:
            stack, _, n = line.rstrip().rpartition(" ")
            out[owner_of(stack)] += int(n)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--recorder", required=True)
    ap.add_argument("--source", default=os.path.join(HERE, "..", "..", ".."))
    ap.add_argument("--seconds", type=float, default=150)
    ap.add_argument("--out", default=None, help="heaptrack's file (default: a temporary one)")
    args = ap.parse_args()
    if not shutil.which("heaptrack") or not shutil.which("heaptrack_print") or os.geteuid():
        print("SKIP: needs root and heaptrack")
        return 77
    tmp = tempfile.mkdtemp(prefix="pfr-heap-owners-")
    out = args.out or os.path.join(tmp, "heap")
    load = bb.Load(args, tmp)
    env = dict(os.environ, PFR_CONFIG=ri.empty_config(tmp))
    try:
        load.start()
        with open(os.path.join(tmp, "recorder.log"), "w") as log:
            p = subprocess.Popen(["heaptrack", "-o", out, args.recorder, "--store",
                                  os.path.join(tmp, "ring.db"), "--metrics-listen",
                                  "127.0.0.1:%d" % bb.free_port()], stdout=log,
                                 stderr=subprocess.STDOUT, env=env)
            time.sleep(args.seconds)
            # heaptrack's script runs the recorder as its child: stop the recorder itself
            kids = subprocess.run(["pgrep", "-P", str(p.pid), "-f", args.recorder],
                                  capture_output=True, text=True).stdout.split()
            for k in kids:
                os.kill(int(k), signal.SIGTERM)
            p.wait(timeout=120)
    finally:
        load.stop()
        load.close()
    data = out if out.endswith(".zst") else out + ".zst"
    folded = os.path.join(tmp, "folded")
    summary = subprocess.run(["heaptrack_print", "-f", data, "--print-peaks", "0",
                              "--print-allocators", "0", "--print-temporary", "0",
                              "--print-leaks", "0", "-F", folded, "--flamegraph-cost-type",
                              "peak"], capture_output=True, text=True).stdout
    for line in summary.splitlines():
        if line.startswith(("peak heap", "peak RSS")):
            print(line)
    print("MiB at each call site's own peak, by owner:")
    for name, n in by_owner(folded).most_common():
        print("  %7.2f  %s" % (n / 2**20, name))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
