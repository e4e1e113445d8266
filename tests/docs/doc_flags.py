#!/usr/bin/env python3
"""docs/configuration.md against the programs' --help.

In configuration.md, "## pfr-recorder", "## pfr-shipper" and "## pfr" open a program's part;
within "## pfr", "### `pfr CMD`" opens a command's. Every table whose first header cell is
"flag" documents flags: the `--flags` of its first column. For each program and command:

  - each documented flag is printed by its --help; a flag marked "(not in `--help`)" instead
    must be accepted by the program's option parser (probed: no "unknown option");
  - each flag of --help's option lines is documented (the reverse);
  - each command `pfr --help` lists has its section.

The flags of `pfr serve --help` must be in docs/serve.md (or in its section here), and the
flags its section here documents must be in its --help.
"""
import argparse
import os
import re
import subprocess
import sys

FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
NOT_IN_HELP = "(not in `--help`)"


def run(cmd, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("PFR_")}
    if env:
        e.update(env)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=e,
                       stdin=subprocess.DEVNULL, timeout=20)
    return p.returncode, p.stdout.decode(errors="replace")


def parse_doc(path):
    """{(program, command or None): {flag: not_in_help}} from configuration.md."""
    out = {}
    prog = cmd = None
    header = None
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        m = re.match(r"^## (pfr-recorder|pfr-shipper|pfr)\s*$", line)
        if m:
            prog, cmd, header = m.group(1), None, None
            continue
        if line.startswith("## "):
            prog, cmd, header = None, None, None
            continue
        m = re.match(r"^### `pfr ([a-z]+)`", line)
        if m and prog == "pfr":
            cmd, header = m.group(1), None
            continue
        if line.startswith("### "):
            header = None
            continue
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if header is None:
            header = cells
            continue
        if not header or header[0] != "flag" or set(line) <= set("|-: "):
            continue
        if prog is None:
            continue
        flags = out.setdefault((prog, cmd), {})
        hidden = NOT_IN_HELP in cells[0]
        for f in FLAG.findall(cells[0].replace(NOT_IN_HELP, "")):
            flags[f] = hidden
    return out


def help_flags(text):
    """The flags of the option lines (those starting with blanks and a dash), not the usage
    line's global options nor flags named in prose."""
    out = set()
    for line in text.splitlines():
        if re.match(r"^\s+-", line):
            out |= set(FLAG.findall(line))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", required=True)
    ap.add_argument("--recorder", required=True)
    ap.add_argument("--shipper", required=True)
    ap.add_argument("--pfr", required=True)
    a = ap.parse_args()

    doc = parse_doc(os.path.join(a.docs, "configuration.md"))
    errors = []
    checked = 0

    def helptext(prog, cmd):
        if prog == "pfr-recorder":
            return run([a.recorder, "--help"])
        if prog == "pfr-shipper":
            return run([a.shipper, "--help"])
        return run([a.pfr] + ([cmd] if cmd else []) + ["--help"])

    def accepted(prog, cmd, flag):
        """The option parser knows flag (it may want a value: only "unknown" counts)."""
        if prog == "pfr-recorder":
            rc, text = run([a.recorder, "--help", flag])
        elif prog == "pfr-shipper":
            rc, text = run([a.shipper, "status", "--config", "/dev/null", "--store",
                            "/nonexistent/ring.db", "--state", "/nonexistent/state.db", flag])
        else:
            rc, text = run([a.pfr, "--store", "/nonexistent/ring.db"] + ([cmd] if cmd else []) +
                           [flag])
        return "unknown option" not in text

    rc, top = run([a.pfr, "--help"])
    if rc != 0:
        errors.append("pfr --help failed")
    listed = []
    in_cmds = False
    for line in top.splitlines():
        if line.startswith("Commands:"):
            in_cmds = True
            continue
        if in_cmds:
            m = re.match(r"^  ([a-z]+)\s", line)
            if not m:
                if line.strip() == "":
                    in_cmds = False
                continue
            if m.group(1) != "help":
                listed.append(m.group(1))
    for c in listed:
        if ("pfr", c) not in doc and c != "serve":
            errors.append(f"`pfr --help` lists command {c}; configuration.md has no "
                          f"\"### `pfr {c}`\" section")

    serve_rc, serve_help = run([a.pfr, "serve", "--help"])
    serve_ok = serve_rc == 0 and "serve" in serve_help

    keys = [("pfr-recorder", None), ("pfr-shipper", None), ("pfr", None)]
    keys += [("pfr", c) for c in ("ls", "flame", "timeline", "diff", "export")]
    keys += sorted(k for k in doc if k[0] == "pfr" and k[1] and k not in keys)
    if ("pfr", "serve") not in keys:
        keys.append(("pfr", "serve"))
    for prog, cmd in keys:
        name = prog + (" " + cmd if cmd else "")
        if cmd == "serve":
            if not serve_ok:
                errors.append(f"`pfr serve --help` fails (exit {serve_rc})")
                continue
            serve_md = os.path.join(a.docs, "serve.md")
            if not os.path.exists(serve_md):
                errors.append("pfr serve exists but docs/serve.md does not")
                continue
            documented = set(doc.get((prog, cmd), {}))
            documented |= set(FLAG.findall(open(serve_md, encoding="utf-8").read()))
            documented.add("--help")  # every command has it; serve.md need not say so
            for f in sorted(help_flags(serve_help) - documented):
                errors.append(f"`pfr serve --help` prints {f}; neither serve.md nor "
                              f"configuration.md documents it")
            for f in sorted(set(doc.get((prog, cmd), {})) - help_flags(serve_help)):
                errors.append(f"configuration.md documents {f} for pfr serve; --help lacks it")
            checked += 1
            continue
        flags = doc.get((prog, cmd))
        if not flags:
            errors.append(f"configuration.md documents no flags for {name}")
            continue
        rc, text = helptext(prog, cmd)
        if rc != 0:
            errors.append(f"{name} --help: exit {rc}")
            continue
        printed = help_flags(text)
        for f, hidden in sorted(flags.items()):
            checked += 1
            if f in printed:
                if hidden:
                    errors.append(f"{name}: {f} is marked 'not in --help' but --help prints it")
                continue
            if not hidden:
                errors.append(f"{name}: configuration.md documents {f}; --help does not print it")
            elif not accepted(prog, cmd, f):
                errors.append(f"{name}: configuration.md documents {f}; the program does not "
                              f"know it")
        for f in sorted(printed - set(flags)):
            errors.append(f"{name}: --help prints {f}; configuration.md does not document it")
        print(f"ok: {name}: {len(flags)} flags documented, {len(printed)} in --help")

    # The probe must be able to fail: a made-up flag is unknown to every program.
    for prog in ("pfr-recorder", "pfr-shipper", "pfr"):
        if accepted(prog, "ls" if prog == "pfr" else None, "--no-such-flag-xyz"):
            errors.append(f"{prog}: the option probe accepts a made-up flag")

    for e in errors:
        print("FAIL:", e)
    if errors:
        return 1
    print(f"PASS: {checked} documented flags checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
