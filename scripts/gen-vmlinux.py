#!/usr/bin/env python3
"""Write bpf/vmlinux/ARCH/vmlinux.h: the kernel types pfr's BPF programs use, and only those.

    scripts/gen-vmlinux.py [--btf FILE] [--check BUILD_DIR]

The header is generated once, from a kernel's BTF, and committed (a build never reads the build
host's kernel). It holds only the structs, fields and enumerators listed below: the programs are
CO-RE, so every struct carries preserve_access_index and libbpf relocates each field access to
the running kernel's layout; a struct here needs only the fields the programs touch, under the
kernel's names. The ABI types (the perf_event context, the register set, the vma iterator) are
copied whole: their layout is fixed and read without relocation.

--btf: the BTF to read (default /sys/kernel/btf/vmlinux); --arch: its kernel's architecture
(default this machine's; the register set differs per architecture). --check BUILD_DIR: afterwards rebuild the
BPF objects of that configured tree with the new header (a type or field missing from the lists
fails there). A program that needs a new field: add it to STRUCTS, run this, commit the header.
"""
import argparse
import json
import os
import platform
import subprocess
import sys

# struct -> the fields the programs use ("a.b": field b of the by-value member a).
STRUCTS = {
    "task_struct": ["flags", "mm", "group_leader", "start_time", "comm", "signal", "in_execve",
                    "pid", "tgid", "exit_code", "cgroups"],
    "css_set": ["dfl_cgrp"],
    "cgroup": ["kn"],
    "kernfs_node": ["__parent", "name", "id"],
    "signal_struct": ["live.counter"],
    "mm_struct": ["exe_file", "context.vdso"],
    "vm_area_struct": ["vm_start", "vm_end", "vm_pgoff", "vm_flags", "vm_file", "vm_mm"],
    "file": ["f_inode", "f_path.dentry", "f_path.mnt"],
    "inode": ["i_ino", "i_sb"],
    "super_block": ["s_dev"],
    "mount": ["mnt.mnt_root", "mnt_parent", "mnt_mountpoint"],
    "dentry": ["d_parent", "d_name.len", "d_name.name"],
}
# Copied whole: the perf_event program's context and the iterator the verifier sizes.
WHOLE = ["bpf_perf_event_data", "bpf_iter_task_vma"]
# Enumerators: map types and flags (uapi/linux/bpf.h), and the helper id probed by CO-RE.
ENUMERATORS = [
    "BPF_MAP_TYPE_HASH", "BPF_MAP_TYPE_ARRAY", "BPF_MAP_TYPE_PERCPU_ARRAY",
    "BPF_MAP_TYPE_LRU_HASH", "BPF_MAP_TYPE_RINGBUF",
    "BPF_ANY", "BPF_NOEXIST", "BPF_F_USER_STACK",
    "BPF_RB_NO_WAKEUP", "BPF_RB_FORCE_WAKEUP", "BPF_RB_AVAIL_DATA",
    "BPF_FUNC_task_pt_regs",
]
# What bpf_helpers.h and its helper declarations expect of vmlinux.h.
PRELUDE = """typedef signed char __s8;
typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u64 __be64;
typedef __u32 __wsum;
typedef _Bool bool;
enum { false = 0, true = 1 };
"""
ARCHES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}


class Btf:
    def __init__(self, path):
        r = subprocess.run(["bpftool", "btf", "dump", "file", path, "-j"], capture_output=True,
                           text=True)
        if r.returncode != 0:
            sys.exit(f"gen-vmlinux: cannot read the BTF of {path}: {(r.stderr or r.stdout).strip()}")
        out = r.stdout
        self.types = {t["id"]: t for t in json.loads(out)["types"]}
        self.by_name = {}
        for t in self.types.values():
            if t["kind"] in ("STRUCT", "UNION", "ENUM", "ENUM64"):
                self.by_name.setdefault((t["kind"], t["name"]), t)

    def struct(self, name):
        t = self.by_name.get(("STRUCT", name))
        if not t:
            sys.exit(f"gen-vmlinux: struct {name} is not in this BTF")
        return t

    def strip(self, tid):
        """The type behind typedefs and qualifiers."""
        t = self.types.get(tid)
        while t and t["kind"] in ("TYPEDEF", "CONST", "VOLATILE", "RESTRICT", "TYPE_TAG"):
            t = self.types[t["type_id"]]
        return t

    def find(self, st, name):
        """Member name of st, looked for in its anonymous members too (as libbpf does)."""
        for m in st["members"]:
            if m["name"] == name:
                return m
            if m["name"] == "(anon)":
                inner = self.strip(m["type_id"])
                if inner["kind"] in ("STRUCT", "UNION"):
                    found = self.find(inner, name)
                    if found:
                        return found
        return None


class Writer:
    def __init__(self, btf):
        self.btf = btf
        self.defined = []  # (name, body), in order of definition
        self.done = set()
        self.declared = set()

    def decl(self, tid, name, fields=None, depth=1):
        """C declaration of name with type tid (typedefs resolved, anonymous types inline)."""
        t = self.btf.types.get(tid)
        if t is None:  # void
            return f"void {name}".rstrip()
        k = t["kind"]
        if k in ("TYPEDEF", "VOLATILE", "RESTRICT", "TYPE_TAG"):
            return self.decl(t["type_id"], name, fields, depth)
        if k == "CONST":
            return "const " + self.decl(t["type_id"], name, fields, depth)
        if k == "INT":
            return f"{t['name']} {name}".rstrip()
        if k == "PTR":
            inner = self.btf.types.get(t["type_id"])
            if inner and inner["kind"] == "FUNC_PROTO":
                return f"void *{name}"  # no program calls through one
            return self.decl(t["type_id"], f"*{name}", None, depth)
        if k == "ARRAY":
            a = t["array"] if "array" in t else t
            return self.decl(a["type_id"], f"{name}[{a['nr_elems']}]", None, depth)
        if k in ("STRUCT", "UNION"):
            kw = k.lower()
            if t["name"] == "(anon)":
                return f"{kw} {self.body(t, fields, depth)} {name}".rstrip()
            if name.startswith("*") and fields is None:
                self.forward(kw, t["name"])
            else:
                self.define(t, fields)
            return f"{kw} {t['name']} {name}".rstrip()
        if k in ("ENUM", "ENUM64"):
            size = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int"}
            return f"{size.get(t['size'], 'unsigned long long')} {name}"
        sys.exit(f"gen-vmlinux: no C for BTF kind {k} ({name})")

    def forward(self, kw, name):
        if (kw, name) not in self.done:
            self.declared.add((kw, name))

    def member(self, m, fields, depth):
        line = self.decl(m["type_id"], m["name"] if m["name"] != "(anon)" else "", fields, depth)
        if m.get("bitfield_size"):
            line += f" : {m['bitfield_size']}"
        return "    " * depth + line + ";"

    def body(self, st, fields, depth):
        """{ members }: all of them, or those named in fields (dotted paths go one level down)."""
        lines = []
        if fields is None:
            for m in st["members"]:
                lines.append(self.member(m, None, depth + 1))
        else:
            groups = {}
            for f in fields:
                head, _, rest = f.partition(".")
                groups.setdefault(head, [])
                if rest:
                    groups[head].append(rest)
            for head, sub in groups.items():
                m = self.btf.find(st, head)
                if m is None:
                    sys.exit(f"gen-vmlinux: {st['name']} has no field {head} in this BTF")
                lines.append(self.member(m, sub or None, depth + 1))
        return "{\n" + "\n".join(lines) + "\n" + "    " * depth + "}"

    def define(self, st, fields):
        key = (st["kind"].lower(), st["name"])
        if key in self.done:
            return
        self.done.add(key)
        self.declared.discard(key)
        body = self.body(st, fields, 0)  # defines the types it holds first
        self.defined.append(f"{key[0]} {key[1]} {body};")

    def enums(self, names):
        groups = {}
        for t in self.btf.types.values():
            if t["kind"] not in ("ENUM", "ENUM64"):
                continue
            for v in t["values"]:
                if v["name"] in names:
                    groups.setdefault(t["name"], []).append(v)
        found = {v["name"] for vs in groups.values() for v in vs}
        missing = [n for n in names if n not in found]
        if missing:
            sys.exit(f"gen-vmlinux: enumerators not in this BTF: {' '.join(missing)}")
        out = []
        for name, vs in sorted(groups.items()):
            tag = "" if name == "(anon)" else name + " "
            vals = "".join(f"    {v['name']} = {v['val']},\n" for v in vs)
            out.append(f"enum {tag}{{\n{vals}}};")
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--btf", default="/sys/kernel/btf/vmlinux")
    ap.add_argument("--arch", default=platform.machine())
    ap.add_argument("--check", metavar="BUILD_DIR")
    args = ap.parse_args()
    arch = ARCHES.get(args.arch)
    if not arch:
        sys.exit(f"gen-vmlinux: no BPF target for {args.arch}")
    btf = Btf(args.btf)
    w = Writer(btf)
    for name in WHOLE:
        w.define(btf.struct(name), None)
    for name, fields in STRUCTS.items():
        w.define(btf.struct(name), fields)
    release = platform.release() if args.btf == "/sys/kernel/btf/vmlinux" else args.btf
    fwd = "".join(f"{kw} {n};\n" for kw, n in sorted(w.declared))
    text = (
        "/* SPDX-License-Identifier: GPL-2.0 */\n"
        f"/* Generated by scripts/gen-vmlinux.py from the BTF of Linux {release} ({arch}): only\n"
        " * the kernel types and fields pfr's BPF programs use. CO-RE relocates every field\n"
        " * access to the running kernel's layout. Edit the script's lists, not this file. */\n"
        "#ifndef __VMLINUX_H__\n#define __VMLINUX_H__\n\n" + PRELUDE + "\n" +
        "\n".join(w.enums(ENUMERATORS)) + "\n\n"
        "#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)\n\n"
        + (fwd + "\n" if fwd else "") + "\n\n".join(w.defined) + "\n\n"
        "#pragma clang attribute pop\n\n#endif /* __VMLINUX_H__ */\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = os.path.join(root, "bpf", "vmlinux", arch, "vmlinux.h")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write(text)
    print(f"wrote {out} ({len(text)} bytes)")
    if args.check:
        subprocess.run(["cmake", "--build", args.check, "--target", "pfr_bpf_gen", "walk_check_gen"],
                       check=True)


if __name__ == "__main__":
    main()
