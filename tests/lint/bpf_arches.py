#!/usr/bin/env python3
"""Every BPF program of the tree builds for every architecture with a committed vmlinux.h.

    bpf_arches.py SOURCE_DIR CLANG BPFTOOL CFLAGS

A build compiles the BPF C for its own architecture only, so a change that breaks another one
(a register read by x86's name, a map declared for x86 alone) would pass on this machine. This
compiles each *.bpf.c under bpf/ and tests/ once per folder of bpf/vmlinux (with CFLAGS, the
flags of bpf/CMakeLists.txt's pfr_bpf_object, and that folder's header), then compares the
skeletons bpftool makes of each program: user space is built against one of them, so their maps,
programs and global variables must be the same on every architecture. Prints each failure and
exits 1 if there is one.
"""
import difflib
import os
import re
import shlex
import subprocess
import sys
import tempfile

# bpf/vmlinux folder -> __TARGET_ARCH_ (bpf/CMakeLists.txt picks them the same way).
TARGETS = {"x86_64": "x86", "arm64": "arm64"}
# A data section the program has no global variable in: its map and empty struct in the skeleton.
EMPTY_SECTION = re.compile(r"\n\tstruct \w+__(\w+) \{\s*\} \*\w+;")


def sources(src):
    for top in ("bpf", "tests"):
        for folder, _, files in sorted(os.walk(os.path.join(src, top))):
            for f in sorted(files):
                if f.endswith(".bpf.c"):
                    yield os.path.join(folder, f)


def skeleton_shape(text, name):
    """The skeleton's struct NAME: its members, less the data sections that hold nothing."""
    m = re.search(r"^struct %s \{.*?^\};" % re.escape(name), text, re.M | re.S)
    if not m:
        return None
    shape = m.group(0)
    for sec in EMPTY_SECTION.findall(shape):
        shape = shape.replace(f"\n\t\tstruct bpf_map *{sec};", "")
    return EMPTY_SECTION.sub("", shape)


def run(cmd):
    """(stdout or None when the command failed, stderr)"""
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None, r.stderr.strip()


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    src, clang, bpftool, cflags = sys.argv[1], sys.argv[2], sys.argv[3], shlex.split(sys.argv[4])
    vmlinux = os.path.join(src, "bpf", "vmlinux")
    failures = []
    folders = sorted(os.listdir(vmlinux))
    if folders != sorted(TARGETS):
        failures.append(f"bpf/vmlinux holds {folders}, this test knows {sorted(TARGETS)}")
    progs = list(sources(src))
    if not progs:
        failures.append("no *.bpf.c found")
    with tempfile.TemporaryDirectory(prefix="bpf_arches.") as tmp:
        for prog in progs:
            rel = os.path.relpath(prog, src)
            name = os.path.basename(prog)[:-len(".bpf.c")] + "_bpf"
            shapes = {}
            for folder, arch in TARGETS.items():
                obj = os.path.join(tmp, f"{name}.{folder}")
                incs = [os.path.join(vmlinux, folder), os.path.join(src, "bpf"),
                        os.path.dirname(prog)]
                out, err = run([clang, "-target", "bpf", *cflags, f"-D__TARGET_ARCH_{arch}",
                                *(f"-I{d}" for d in incs), "-c", prog, "-o", obj + ".tmp.o"])
                if out is None:
                    failures.append(f"{rel} ({folder}): does not compile:\n{err}")
                    continue
                out, err = run([bpftool, "gen", "object", obj + ".o", obj + ".tmp.o"])
                skel, err2 = run([bpftool, "gen", "skeleton", obj + ".o", "name", name])
                shape = skeleton_shape(skel or "", name) if out is not None else None
                if shape is None:
                    failures.append(f"{rel} ({folder}): no skeleton:\n{err}\n{err2}".rstrip())
                    continue
                shapes[folder] = shape
                print(f"{rel} ({folder}): built")
            first = next(iter(shapes.items()), None)
            for folder, shape in shapes.items():
                if shape != first[1]:
                    diff = difflib.unified_diff(first[1].splitlines(), shape.splitlines(),
                                                first[0], folder, lineterm="", n=1)
                    failures.append(f"{rel}: the skeletons differ:\n" + "\n".join(diff))
    for f in failures:
        print(f, file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
