#!/usr/bin/env python3
"""Write bpf/vmlinux/ARCH/vmlinux.h: the kernel types pfr's BPF programs use, and only those.

    scripts/gen-vmlinux.py (--package NAME[=VERSION] | --deb FILE | --btf FILE [--arch ARCH])
                           [--check BUILD_DIR]

The header is generated once per architecture, from a kernel's BTF, and committed (a build never
reads the build host's kernel). It holds only the structs, fields and enumerators listed below:
the programs are CO-RE, so every struct carries preserve_access_index and libbpf relocates each
field access to the running kernel's layout; a struct here needs only the fields the programs
touch, under the kernel's names. The ABI types (the perf_event context, the register set, the vma
iterator) are copied whole: their layout is fixed and read without relocation.

The committed headers come from Debian kernel packages, so anyone can make them again on any host:
--package NAME[=VERSION]: a Debian kernel image package of any architecture (say
linux-image-6.12.95+deb12-arm64; --arch when its name does not end with it), fetched with
apt-get download from this machine's configured sources through a private apt state (the
machine's own apt is left as it is). --deb FILE: such a package already downloaded. The BTF is
cut out of the package's /boot/vmlinuz (a raw or compressed arm64 Image, an x86 bzImage) and the
header names the package, its version and its SHA-256; the package and the kernel stay in a
temporary folder.
--btf FILE: a raw BTF file (say /sys/kernel/btf/vmlinux; --arch: its kernel's architecture,
default this machine's; the register set differs per architecture).
--check BUILD_DIR: afterwards rebuild the BPF objects of that configured tree with the new header
(a type or field missing from the lists fails there). A program that needs a new field: add it to
STRUCTS, run this for every architecture, commit the headers.
"""
import argparse
import hashlib
import json
import lzma
import os
import platform
import re
import struct
import subprocess
import sys
import tarfile
import tempfile
import zlib

# struct -> the fields the programs use ("a.b": field b of the by-value member a).
STRUCTS = {
    "task_struct": ["flags", "mm", "group_leader", "start_time", "comm", "signal", "in_execve",
                    "pid", "tgid", "exit_code", "cgroups"],
    "css_set": ["dfl_cgrp"],
    "cgroup": ["kn"],
    "kernfs_node": ["parent", "name", "id"],
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
# Machine or Debian architecture -> the folder under bpf/vmlinux (bpf/CMakeLists.txt picks it).
ARCHES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}
# That folder -> the Debian architecture of its kernel packages.
DEBIAN_ARCH = {"x86_64": "amd64", "arm64": "arm64"}


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


# A BTF header: magic 0xeB9F (little-endian), version 1, flags 0, then hdr_len, type_off,
# type_len, str_off, str_len.
BTF_MAGIC = b"\x9f\xeb\x01\x00"


def find_btf(image):
    """The kernel's .BTF section in an uncompressed kernel image: the largest well-formed BTF
    (a 24-byte header, the types, then the strings, which start with an empty one) there."""
    best = b""
    i = image.find(BTF_MAGIC)
    while i >= 0:
        if i + 24 <= len(image):
            hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from("<5I", image, i + 4)
            end = i + hdr_len + str_off + str_len
            if (hdr_len == 24 and type_off == 0 and str_off == type_len and str_len and
                    end <= len(image) and image[i + hdr_len + str_off] == 0 and
                    end - i > len(best)):
                best = image[i:end]
        i = image.find(BTF_MAGIC, i + 1)
    return best


def decompress(blob):
    """blob decompressed by its magic (gzip, xz or zstd; what follows the stream is ignored), or
    None when it is none of those."""
    if blob[:2] == b"\x1f\x8b":
        return zlib.decompressobj(wbits=31).decompress(blob)
    if blob[:6] == b"\xfd7zXZ\x00":
        return lzma.LZMADecompressor().decompress(blob)
    if blob[:4] == b"\x28\xb5\x2f\xfd":
        # zstd refuses bytes after the frame: the kernel appends the size (4 bytes) to its payloads
        for cut in (0, 4):
            r = subprocess.run(["zstd", "-dcq"], input=blob[:len(blob) - cut], capture_output=True)
            if r.returncode == 0:
                return r.stdout
        sys.exit(f"gen-vmlinux: zstd cannot decompress the kernel: {r.stderr.decode().strip()}")
    return None


def kernel_image(vmlinuz):
    """The uncompressed kernel of a vmlinuz: an x86 bzImage's payload, an arm64 EFI zboot image's
    payload, a compressed arm64 Image (Image.gz), or the file itself (a raw arm64 Image)."""
    if vmlinuz[0x202:0x206] == b"HdrS":  # x86 boot protocol: the payload at 0x248 (2.08 on)
        setup = ((vmlinuz[0x1F1] or 4) + 1) * 512
        off, length = struct.unpack_from("<II", vmlinuz, 0x248)
        payload = decompress(vmlinuz[setup + off:setup + off + length])
        if payload is None:
            sys.exit("gen-vmlinux: the bzImage's payload is not gzip, xz or zstd")
        return payload
    if vmlinuz[:2] == b"MZ" and vmlinuz[4:8] == b"zimg":  # EFI zboot: payload offset, size
        off, length = struct.unpack_from("<II", vmlinuz, 8)
        payload = decompress(vmlinuz[off:off + length])
        if payload is None:
            sys.exit("gen-vmlinux: the zboot image's payload is not gzip, xz or zstd")
        return payload
    return decompress(vmlinuz) or vmlinuz


def deb_field(deb, name):
    r = subprocess.run(["dpkg-deb", "-f", deb, name], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"gen-vmlinux: {deb} is not a Debian package: {r.stderr.strip()}")
    return r.stdout.strip()


def deb_vmlinuz(deb):
    """(release, bytes) of the /boot/vmlinuz-RELEASE in the Debian package deb."""
    p = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", deb], stdout=subprocess.PIPE)
    found = None
    with tarfile.open(fileobj=p.stdout, mode="r|") as tar:  # read to the end: dpkg-deb checks
        for m in tar:
            name = re.fullmatch(r"(?:\./)?boot/vmlinuz-(.+)", m.name)
            if name and m.isfile() and not found:
                found = (name.group(1), tar.extractfile(m).read())
    p.stdout.close()
    p.wait()
    if not found:
        sys.exit(f"gen-vmlinux: no /boot/vmlinuz-* in {deb}")
    return found


def download(spec, debian_arch, tmp):
    """Path of the .deb of spec (NAME or NAME=VERSION) for debian_arch, fetched into tmp by apt
    from this machine's sources but with its own lists: the machine's apt state is not touched
    (no foreign architecture added, no lock taken)."""
    state = os.path.join(tmp, "apt")
    for d in ("lists/partial", "cache/archives/partial"):
        os.makedirs(os.path.join(state, d))
    apt = ["-o", f"APT::Architecture={debian_arch}", "-o", f"APT::Architectures::={debian_arch}",
           "-o", f"Dir::State::Lists={state}/lists", "-o", f"Dir::Cache={state}/cache",
           "-o", "Dir::State::status=/dev/null", "-o", "APT::Sandbox::User=root", "-q"]
    update = subprocess.run(["apt-get", *apt, "update"], capture_output=True, text=True)
    r = subprocess.run(["apt-get", *apt, "download", spec], cwd=tmp, capture_output=True, text=True)
    debs = [f for f in os.listdir(tmp) if f.endswith(".deb")]
    if r.returncode != 0 or len(debs) != 1:
        sys.exit(f"gen-vmlinux: apt-get download {spec} ({debian_arch}) failed: "
                 f"{r.stderr.strip()}\n{update.stderr.strip()}")
    return os.path.join(tmp, debs[0])


def from_deb(deb, tmp):
    """(raw BTF path, architecture folder, release, source line) of a kernel image package."""
    debian_arch = deb_field(deb, "Architecture")
    arch = ARCHES.get(debian_arch)
    if not arch:
        sys.exit(f"gen-vmlinux: no BPF target for Debian architecture {debian_arch}")
    release, vmlinuz = deb_vmlinuz(deb)
    btf = find_btf(kernel_image(vmlinuz))
    if not btf:
        sys.exit(f"gen-vmlinux: no BTF in {deb}'s vmlinuz-{release} (a kernel without "
                 "CONFIG_DEBUG_INFO_BTF?)")
    path = os.path.join(tmp, "vmlinux.btf")
    with open(path, "wb") as f:
        f.write(btf)
    with open(deb, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    pkg, version = deb_field(deb, "Package"), deb_field(deb, "Version")
    source = (f"Debian package {pkg} {version} ({debian_arch}),\n"
              f" * .deb SHA-256 {sha};\n"
              f" * again: scripts/gen-vmlinux.py --package {pkg}={version}")
    return path, arch, release, source


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--package", metavar="NAME[=VERSION]")
    src.add_argument("--deb", metavar="FILE")
    src.add_argument("--btf", metavar="FILE")
    ap.add_argument("--arch", help="of --package (default: the one its name ends with) and "
                    "--btf (default: this machine's)")
    ap.add_argument("--check", metavar="BUILD_DIR")
    args = ap.parse_args()
    named = re.search(r"-(amd64|arm64)(=|$)", args.package or "")
    machine = args.arch or (named.group(1) if named else platform.machine())
    arch = ARCHES.get(machine)
    if not arch:
        sys.exit(f"gen-vmlinux: no BPF target for {machine}")
    with tempfile.TemporaryDirectory(prefix="gen-vmlinux.") as tmp:
        if args.btf:
            path, source = args.btf, f"the BTF file {args.btf}"
            release = platform.release() if args.btf == "/sys/kernel/btf/vmlinux" else args.btf
        else:
            deb = args.deb or download(args.package, DEBIAN_ARCH[arch], tmp)
            path, arch, release, source = from_deb(deb, tmp)
        btf = Btf(path)
    w = Writer(btf)
    for name in WHOLE:
        w.define(btf.struct(name), None)
    for name, fields in STRUCTS.items():
        w.define(btf.struct(name), fields)
    fwd = "".join(f"{kw} {n};\n" for kw, n in sorted(w.declared))
    text = (
        "/* SPDX-License-Identifier: GPL-2.0 */\n"
        f"/* Generated by scripts/gen-vmlinux.py from the BTF of Linux {release} ({arch}): only\n"
        " * the kernel types and fields pfr's BPF programs use. CO-RE relocates every field\n"
        " * access to the running kernel's layout. Edit the script's lists, not this file.\n"
        f" * From {source} */\n"
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
