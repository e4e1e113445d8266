#!/usr/bin/env python3
"""Prints, for every code object of the modules named (and their nested code), one line:
HEX_LINETABLE FIRSTLINENO LINE0,LINE1,...  -- the line CPython itself gives each code unit
(co_positions(); -1 for none). py_lines_check holds pfr's decoder to it.

Usage: lines_oracle.py MODULE...
"""
import importlib
import sys
import types


def codes(co):
    yield co
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            yield from codes(c)


def main():
    n = 0
    for name in sys.argv[1:]:
        mod = importlib.import_module(name)
        with open(mod.__file__, "rb") as f:
            top = compile(f.read(), mod.__file__, "exec")
        for co in codes(top):
            lines = [p[0] if p[0] is not None else -1 for p in co.co_positions()]
            print(co.co_linetable.hex() or "-", co.co_firstlineno, ",".join(map(str, lines)))
            n += 1
    print("# %d code objects" % n, file=sys.stderr)


if __name__ == "__main__":
    main()
