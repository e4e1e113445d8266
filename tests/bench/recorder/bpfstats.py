"""What the recorder benchmarks read about BPF programs: shared by bench_recorder.py and
bench_bpf_sample.py."""
import json
import os
import subprocess


def bpf_progs():
    """run_time_ns of every loaded BPF program, by program id."""
    out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True)
    return {p["id"]: p.get("run_time_ns", 0) for p in json.loads(out.stdout or "[]")}


def prog_ids_of(pid):
    """Ids of the BPF programs process pid holds a descriptor of (from /proc/PID/fdinfo): this
    bpftool cannot tell which process holds a program, and other jobs load programs too."""
    ids = set()
    d = "/proc/%d/fdinfo" % pid
    for fd in os.listdir(d):
        try:
            with open(os.path.join(d, fd)) as f:
                for line in f:
                    if line.startswith("prog_id:"):
                        ids.add(int(line.split()[1]))
        except OSError:
            pass
    return ids


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])
