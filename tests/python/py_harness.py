"""What the Python integration tests (python_*_itest.py) share: their arguments and the harness
around a test run on recorder_itest.py's checks (tests/recorder)."""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recorder"))
import recorder_itest as ri  # noqa: E402


def parse_args(*flags):
    """--recorder, --dump, --python and --workload, then flags: "--sanitized" and "--also" as
    recorder_python takes them, any other flag with a value. None (said) when not root: the
    recorder loads BPF programs."""
    ap = argparse.ArgumentParser()
    for f in ("--recorder", "--dump", "--python", "--workload") + flags:
        if f == "--sanitized":
            ap.add_argument(f, action="store_true")
        elif f == "--also":
            ap.add_argument(f, action="append", default=[])
        else:
            ap.add_argument(f, required=True)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("FAIL  needs root (the recorder loads BPF programs)")
        return None
    return args


def harness(prefix, run, args):
    """recorder_itest's harness (run in a temporary folder, what it started killed after)."""
    return ri.harness(prefix, run, args)


def samples(chunks, pid, hz=99):
    """pid's samples in the chunks recorder_itest.dump read, one entry per sample: a stack's
    entry holds its samples' count as its value (the period times the count)."""
    period = 1e9 / hz
    return [s for c in chunks for s in c["samples"] if s["pid"] == pid
            for _ in range(max(1, round(s["value"] / period)))]
