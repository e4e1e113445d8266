"""What the recorder benchmarks read about BPF programs: shared by bench_recorder.py and
bench_bpf_sample.py."""
import contextlib
import json
import os
import subprocess
import time


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


@contextlib.contextmanager
def host_workload(idler, spinner, nidlers, tmp):
    """BPF run-time statistics on, nidlers mostly idle processes and one spinner per CPU (each
    counting its work in a file of tmp) for the benchmark's life; yields the spinners' files.
    Everything is stopped and the statistics setting restored on the way out."""
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        old_stats = f.read().strip()
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    workers = []
    try:
        for _ in range(nidlers):
            workers.append(subprocess.Popen([idler, "3"]))
        files = [os.path.join(tmp, "spin%d" % i) for i in range(os.cpu_count())]
        for f in files:
            workers.append(subprocess.Popen([spinner, f]))
        time.sleep(2)
        yield files
    finally:
        for w in workers:
            w.kill()
        for w in workers:
            w.wait()
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=" + old_stats])
