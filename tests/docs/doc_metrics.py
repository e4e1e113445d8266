#!/usr/bin/env python3
"""The docs against the recorder's metric tables: every metric the docs name in backquotes
(`pfr_store_bytes`, `pfr_unwind_files_total{outcome="no_room"}`) is a family of the tables, with
those labels and label values; a name shaped like a metric that no table has and no code
defines (a family renamed or removed) fails. The tables' own checks (counters end in _total,
nothing else does, no name twice) run first, in `pfr-recorder-metrics list`."""
import argparse
import pathlib
import re
import subprocess
import sys

NAME = r"(?:pfr|container_go)_[a-z0-9_]*[a-z0-9]"
SPAN = re.compile(r"`(" + NAME + r")(\{[^`]*\})?`")
LABEL = re.compile(r'([a-z_]+)(?:="([^"]*)"((?:\\?\|"[^"]*")*))?')


def families(tool):
    out = subprocess.run([tool, "list"], check=True, capture_output=True, text=True).stdout
    fams = {}
    for line in out.splitlines():
        name, _type, *labels = line.split()
        fams[name] = {}
        for lab in labels:
            key, values = lab.split("=", 1)
            fams[name][key] = None if values == "*" else set(values.split("|"))
    return fams


def code_words(root):
    """Identifiers of the C code (string literals left out: metric names live there) and of the
    build files (library names)."""
    words = set()
    strings = re.compile(r'"(?:\\.|[^"\\\n])*"')
    for pattern in ("**/*.c", "**/*.h"):
        for path in root.glob(pattern):
            if any(part.startswith("build") for part in path.relative_to(root).parts):
                continue
            words.update(re.findall(NAME, strings.sub("", path.read_text(errors="replace"))))
    for path in root.glob("**/CMakeLists.txt"):
        if not any(part.startswith("build") for part in path.relative_to(root).parts):
            words.update(re.findall(NAME, path.read_text(errors="replace")))
    return words


def check_labels(where, name, spec, labels, problems):
    for m in LABEL.finditer(spec.strip("{}")):
        key, first, rest = m.group(1), m.group(2), m.group(3) or ""
        if key not in labels:
            problems.append("%s: %s has no label '%s' (labels: %s)"
                            % (where, name, key, ", ".join(sorted(labels)) or "none"))
            continue
        if first is None or labels[key] is None:
            continue
        for value in [first] + re.findall(r'"([^"]*)"', rest):
            if value not in labels[key]:
                problems.append("%s: %s{%s} has no value '%s' (values: %s)"
                                % (where, name, key, value, ", ".join(sorted(labels[key]))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", required=True, type=pathlib.Path)
    ap.add_argument("--src", required=True, type=pathlib.Path)
    ap.add_argument("--tool", required=True)
    a = ap.parse_args()
    fams = families(a.tool)
    words = code_words(a.src)
    problems = []
    checked = 0
    for doc in sorted(a.docs.glob("*.md")):
        for lineno, line in enumerate(doc.read_text().splitlines(), 1):
            for m in SPAN.finditer(line):
                name, spec = m.group(1), m.group(2)
                where = "%s:%d" % (doc.name, lineno)
                if name in fams:
                    checked += 1
                    if spec:
                        check_labels(where, name, spec, fams[name], problems)
                elif name not in words:
                    problems.append("%s: `%s` is no metric of the recorder's tables (renamed?) "
                                    "and nothing in the code" % (where, name))
    for p in problems:
        print(p)
    if checked == 0:
        print("no metric found in %s: the check checked nothing" % a.docs)
        return 1
    print("%d mentions of metrics checked, %d problems" % (checked, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
