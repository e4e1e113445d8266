#!/usr/bin/env python3
"""Prints, for every code object of the modules named (and their nested code), one line:
HEX_LINETABLE FIRSTLINENO LINE0,LINE1,...  -- the line CPython itself gives each code unit
(co_positions(); -1 for none). py_lines_check holds pfr's decoder to it.

Run by 3.8-3.10 (pfr decodes their co_lnotab, 3.10's co_linetable), the table is that one and
the lines are the interpreter's own C function's, PyCode_Addr2Line (what a frame's f_lineno
is made from), asked through ctypes for each code unit's byte offset.

Usage: lines_oracle.py MODULE...
"""
import ctypes
import importlib
import sys
import types

OLD = sys.version_info < (3, 11)
if OLD:
    addr2line = ctypes.pythonapi.PyCode_Addr2Line
    addr2line.argtypes = [ctypes.py_object, ctypes.c_int]
    addr2line.restype = ctypes.c_int


def table_and_lines(co):
    """The line table pfr decodes for co, and the line of each code unit."""
    if not OLD:
        return co.co_linetable, [p[0] if p[0] is not None else -1 for p in co.co_positions()]
    tab = co.co_linetable if sys.version_info >= (3, 10) else co.co_lnotab
    return tab, [addr2line(co, off) for off in range(0, len(co.co_code), 2)]


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
            tab, lines = table_and_lines(co)
            print(tab.hex() or "-", co.co_firstlineno, ",".join(map(str, lines)))
            n += 1
    print("# %d code objects" % n, file=sys.stderr)


if __name__ == "__main__":
    main()
