#!/usr/bin/env python3
"""The build graph follows the module graph (docs/developing.md, "The build graph").

    build_graph.py SOURCE_DIR

1. No include path into another folder: every directory given to include_directories() or
   target_include_directories() is the folder's own (${CMAKE_CURRENT_SOURCE_DIR}/...), its build
   folder (${CMAKE_CURRENT_BINARY_DIR}/...), not a subfolder that is a module of its own, a target's public ones
   ($<TARGET_PROPERTY:T,INTERFACE_INCLUDE_DIRECTORIES>) or one of OWN_VARS. A module's headers
   reach another target by linking the library.
2. Layers: a library or program links only modules below its own (common < proto < store, bpf <
   recorder, shipper, query), never one beside or above it.
Prints each breach (file:line) and exits 1 if there is one.
"""
import os
import re
import sys

# Include directories held in a variable: a system library's, or a module's own build folder.
OWN_VARS = {"LIBIBERTY_INCLUDE_DIR", "PFR_PYTHON311_INCLUDE", "PFR_PYTHON_EXTRA_INCLUDE",
            "PFR_PROTO_GEN_DIR", "gen"}
KEYWORDS = {"PUBLIC", "PRIVATE", "INTERFACE", "SYSTEM", "BEFORE", "AFTER"}
LAYER = {"common": 0, "proto": 1, "store": 2, "bpf": 2, "recorder": 3, "shipper": 3, "query": 3}
CALL = re.compile(r"^\s*(target_include_directories|include_directories|target_link_libraries|"
                  r"add_library|add_executable)\s*\(", re.M | re.I)


def calls(path):
    """(name, line, arguments) of the calls the checks look at (comments stripped)."""
    text = re.sub(r"#.*", "", open(path).read())
    for m in CALL.finditer(text):
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        yield m.group(1).lower(), text.count("\n", 0, m.start()) + 1, text[m.end():i - 1].split()


def include_ok(arg, folder):
    if arg in KEYWORDS or ".." in arg:
        return arg in KEYWORDS
    m = re.fullmatch(r"\$\{CMAKE_CURRENT_(SOURCE|BINARY)_DIR\}(/[\w./-]*)?", arg)
    if m:  # a subfolder with a CMakeLists.txt of its own is another module
        sub = m.group(2)
        return not (m.group(1) == "SOURCE" and sub and
                    os.path.exists(os.path.join(folder, sub.strip("/"), "CMakeLists.txt")))
    if re.fullmatch(r"\$<TARGET_PROPERTY:[\w-]+,INTERFACE_INCLUDE_DIRECTORIES>", arg):
        return True
    m = re.fullmatch(r"\$\{(\w+)\}", arg)
    return bool(m) and m.group(1) in OWN_VARS


def main():
    root = sys.argv[1]
    files = []
    for d, subdirs, names in os.walk(root):
        subdirs[:] = [s for s in subdirs if not s.startswith((".", "build"))]
        files += [os.path.join(d, n) for n in names if n == "CMakeLists.txt" or n.endswith(".cmake")]
    bad = []
    module = {}  # target -> its module (first folder) for the layered ones
    links = []
    for f in sorted(files):
        rel = os.path.relpath(f, root)
        top = rel.split(os.sep)[0]
        for name, line, args in calls(f):
            where = f"{rel}:{line}"
            if name == "target_include_directories":
                bad += [f"{where}: {args[0]} includes {a}" for a in args[1:]
                        if not include_ok(a, os.path.dirname(f))]
            elif name == "include_directories":
                bad += [f"{where}: includes {a}" for a in args if not include_ok(a, os.path.dirname(f))]
            elif name in ("add_library", "add_executable") and top in LAYER:
                module[args[0]] = top
            elif name == "target_link_libraries" and top in LAYER:
                links += [(where, args[0], a) for a in args[1:]]
    for where, tgt, dep in links:
        a, b = module.get(tgt), module.get(dep)
        if a and b and a != b and LAYER[b] >= LAYER[a]:
            bad.append(f"{where}: {tgt} ({a}) links {dep} ({b}), not a lower layer")
    for b in bad:
        print(b)
    print(f"build_graph: {len(files)} CMake files, {len(links)} links of layered modules, "
          f"{len(bad)} breaches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
