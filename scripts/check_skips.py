#!/usr/bin/env python3
"""Fail a test run on any skip that tests/skips-allowed.txt does not name.

Finds the skips of a ctest run: cmocka's "[  SKIPPED ] name" lines in ctest's log of every
test's output (BUILD/Testing/Temporary/LastTest.log; cmocka's skip() exits 0, so ctest counts
such a test as passed), and the tests ctest's own output reports "***Skipped" (exit code 77).
Allowed skips are printed with their reason; any other skip makes the exit status 1.
Usage: check_skips.py LAST_TEST_LOG CTEST_OUTPUT ALLOW_LIST
"""
import re
import sys

HEADER = re.compile(r"^\d+/\d+ Test: (\S+)$")
CMOCKA_SKIP = re.compile(r"^\[  SKIPPED \] (\S+)$")
CTEST_SKIP = re.compile(r"Test +#\d+: (\S+) \.*\*\*\*Skipped")


def allowed(path):
    out = {}
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if line and not line.startswith("#"):
            test, case, reason = line.split(None, 2)
            out[(test, case)] = reason
    return out


def skips(log, console):
    """(ctest test, cmocka test or "-") of every skip in the logs."""
    found, test = set(), None
    for line in open(log, encoding="utf-8", errors="replace"):
        line = line.rstrip("\n")
        m = HEADER.match(line)
        if m:
            test = m.group(1)
            continue
        m = CMOCKA_SKIP.match(line)
        if m and test:
            found.add((test, m.group(1)))
    for line in open(console, encoding="utf-8", errors="replace"):
        m = CTEST_SKIP.search(line)
        if m:
            found.add((m.group(1), "-"))
    return found


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    allow = allowed(sys.argv[3])
    bad = 0
    for test, case in sorted(skips(sys.argv[1], sys.argv[2])):
        reason = allow.get((test, case))
        what = test if case == "-" else "%s: %s" % (test, case)
        if reason:
            print("allowed skip: %s (%s)" % (what, reason))
        else:
            print("SKIPPED, not allowed: %s" % what, file=sys.stderr)
            bad += 1
    if bad:
        print("check_skips: %d skipped test(s); on a machine set up by "
              "scripts/install-deps.sh --test none should be (tests/skips-allowed.txt lists those "
              "that may)" % bad, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
