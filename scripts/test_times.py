#!/usr/bin/env python3
"""Print the slowest tests of ctest runs as a compact table, with the runs' totals.

Reads ctest's console output (the lines "N/M Test #K: name ....   Passed   12.34 sec") of one or
more runs. scripts/test.sh prints it last, so that the tail of a CI log shows where the suite's
time went (a CI log keeps only its head and its tail).
Usage: test_times.py [-n COUNT] LABEL=CTEST_OUTPUT [LABEL=CTEST_OUTPUT ...]
"""
import argparse
import os
import re

RESULT = re.compile(r"Test +#\d+: (\S+) \.*\s*(?:\*\*\*)?(.*?)\s+([0-9.]+) sec\s*$")
REAL = re.compile(r"Total Test time \(real\) = +([0-9.]+) sec")


def parse(path):
    """([(seconds, name, status)], real seconds or None) of one ctest output."""
    rows, real = [], None
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    for line in lines:
        m = RESULT.search(line)
        if m:
            status = m.group(2).strip()
            rows.append((float(m.group(3)), m.group(1), "" if status == "Passed" else status))
            continue
        m = REAL.search(line)
        if m:
            real = float(m.group(1))
    return rows, real


def cell(row):
    secs, name, status = row
    return f"{secs:7.1f} {name[:32]:<32} {status[:10]:<10}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=40)
    ap.add_argument("runs", nargs="+", metavar="LABEL=CTEST_OUTPUT")
    args = ap.parse_args()
    every = []
    for run in args.runs:
        label, path = run.split("=", 1)
        if not os.path.exists(path):  # that run did not start
            continue
        rows, real = parse(path)
        if not rows:
            print(f"{label}: no test results in {path}")
            continue
        busy = sum(r[0] for r in rows)
        wall = f"{real:.0f} s" if real is not None else "not finished"
        print(f"{label}: {len(rows)} tests, {busy:.0f} s of test time, {wall} of wall time")
        first = label == args.runs[0].split("=", 1)[0]
        every += [(s, n if first else f"{n} [{label}]", st) for s, n, st in rows]
    every.sort(reverse=True)
    top = every[: args.n]
    if not top:
        return
    print(f"the {len(top)} slowest (seconds; two columns, the slowest first down each):")
    half = (len(top) + 1) // 2
    for i in range(half):
        left = cell(top[i])
        right = cell(top[i + half]) if i + half < len(top) else ""
        print(f"{left} | {right}".rstrip(" |"))


if __name__ == "__main__":
    main()
