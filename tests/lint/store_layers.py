#!/usr/bin/env python3
"""The store's files follow its layers (docs/store.md, "Layers").

    store_layers.py SOURCE_DIR

1. Every internal module of store/ (a store_X.h and its store_X.c) has a layer below; a module's
   files include only the headers of modules of a lower layer, and their own (so no include
   circle). pfr_store.c, the handle's public calls, is on top; pfr_store.h, the public API, is
   below everything and includes no internal header.
2. Internal names are store_*: no internal header declares a pfr_store_* name (those are the
   public API's, in pfr_store.h).
3. A file of store/ that is in no layer fails: a new module says where it stands.
Prints each breach (file:line) and exits 1 if there is one.
"""
import os
import re
import sys

LAYER = {
    "pfr_store.h": -1,  # the public API
    "store_util": 0, "store_policy": 0,  # building blocks and the pure space policy
    "store_codec": 1,  # the row formats (no SQLite)
    "store_db": 1,  # the floor: connection, statements, meta
    "store_fold": 1,  # the coarsest tier's fold: a pure function over a profile (no SQLite)
    "store_dict": 2, "store_space": 2,  # dictionaries and the chunk decoder; disk measures
    "store_build": 3, "store_migrate": 3, "store_handle": 3,
    "store_cursor": 4, "store_pins": 4,  # cursors; pins (on the floor and the stream rows)
    "store_merge": 4,  # the merger of decoded chunks
    "store_retention": 5,  # tiers: what to roll up or evict (pins kept), and the roll-up's merge
    "store_write": 6, "store_read": 6, "store_slice": 6,
    "store_pin_api": 6,  # the public pin calls (add with its budget, list, remove)
    "pfr_store.c": 7,  # the handle's open, close, stats
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
DECL = re.compile(r"\bpfr_store_\w+\s*\(")


def module(name):
    if name in LAYER:
        return name
    return os.path.splitext(name)[0]


def main(src):
    store = os.path.join(src, "store")
    bad = []
    for name in sorted(os.listdir(store)):
        if not name.endswith((".c", ".h")):
            continue
        mod = module(name)
        if mod not in LAYER:
            bad.append(f"store/{name}:1: in no layer (add it to tests/lint/store_layers.py)")
            continue
        text = open(os.path.join(store, name)).read()
        for m in INCLUDE.finditer(text):
            inc = m.group(1)
            if not (inc.startswith("store_") or inc == "pfr_store.h"):
                continue
            line = text.count("\n", 0, m.start()) + 1
            imod = module(inc)
            if imod not in LAYER:
                bad.append(f"store/{name}:{line}: includes {inc}, in no layer")
            elif imod != mod and LAYER[imod] >= LAYER[mod]:
                bad.append(f"store/{name}:{line}: layer {LAYER[mod]} includes {inc}, "
                           f"layer {LAYER[imod]} (only lower layers)")
        if name.endswith(".h") and name != "pfr_store.h":
            for m in DECL.finditer(re.sub(r"/\*.*?\*/", "", text, flags=re.S)):
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"store/{name}:{line}: internal header declares {m.group(0)[:-1]} "
                           "(internal names are store_*)")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
