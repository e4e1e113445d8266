"""What the recorder benchmarks share: BPF program statistics, a profiler's CPU (cgroup v2) and
the host workload (spinners, idle processes, churn). Used by bench_recorder.py,
bench_sample_cost.py, bench_churn_ab.py, bench_bpf_sample.py and bench_unwind.py."""
import contextlib
import os
import signal
import subprocess
import time


def _fdinfos(pid):
    """The /proc/PID/fdinfo entries of process pid, each as a dict of its fields."""
    d = "/proc/%d/fdinfo" % pid
    for fd in os.listdir(d):
        try:
            with open(os.path.join(d, fd)) as f:
                yield dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue


def prog_run_ns(pid):
    """run_time_ns of the BPF programs process pid holds a descriptor of, by program id (from
    /proc/PID/fdinfo): other jobs' programs are left out, and no bpftool process runs inside a
    measured window (a new process is work for the profilers measured)."""
    return {k: v[1] for k, v in prog_stats(pid).items()}


def prog_stats(pid):
    """(prog_type, run_time_ns, run_cnt) of the BPF programs process pid holds a descriptor of,
    by program id (prog_type 7 is perf_event: one run per sample)."""
    runs = {}
    for info in _fdinfos(pid):
        if "prog_id" in info:
            # a program's own descriptor has its statistics; a link's names it only
            prog = int(info["prog_id"])
            old = runs.get(prog, (-1, 0, 0))
            if "prog_type" in info or old[0] < 0:
                ptype = int(info["prog_type"]) if "prog_type" in info else old[0]
                runs[prog] = (ptype, max(old[1], int(info.get("run_time_ns", "0"))),
                              max(old[2], int(info.get("run_cnt", "0"))))
    return runs


def map_memlock(pid):
    """Bytes of kernel memory in the BPF maps process pid holds a descriptor of (fdinfo's
    memlock, each map once): memory no RSS figure shows."""
    maps = {}
    for info in _fdinfos(pid):
        if "map_id" in info and "memlock" in info:
            maps[int(info["map_id"])] = int(info["memlock"])
    return sum(maps.values())


def prog_ids_of(pid):
    """Ids of the BPF programs process pid holds a descriptor of."""
    return set(prog_run_ns(pid))


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def cgroup2_root():
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or .../unified on a hybrid
    host), or None."""
    with open("/proc/mounts") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 2 and fields[2] == "cgroup2":
                return fields[1]
    return None


class CpuGroup:
    """A cgroup v2 group of its own for one profiler: its CPU time to the microsecond, all its
    threads and children included, where /proc/PID/stat counts 10 ms ticks. Without cgroup v2
    (or without the right to make a group) usage_s() returns None and callers fall back to
    /proc."""

    def __init__(self, name):
        root = cgroup2_root()
        self.path = None
        if root:
            path = os.path.join(root, "%s-%d" % (name, os.getpid()))
            try:
                os.mkdir(path)
                self.path = path
            except OSError:
                pass

    def join(self):
        """Moves the calling process into the group (for Popen's preexec_fn)."""
        if self.path:
            with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
                f.write("0")

    def usage_s(self):
        if not self.path:
            return None
        with open(os.path.join(self.path, "cpu.stat")) as f:
            for line in f:
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) / 1e6
        return None

    def kill(self):
        """Kills every process in the group (cgroup.kill, Linux 5.14) and waits until none is
        left, also those that left the caller's process group or session; False when the group
        cannot (no group, an older kernel)."""
        if not self.path or not os.path.exists(os.path.join(self.path, "cgroup.kill")):
            return False
        with open(os.path.join(self.path, "cgroup.kill"), "w") as f:
            f.write("1")
        for _ in range(200):
            # "populated 0" only once the last process is released: until then rmdir fails
            with open(os.path.join(self.path, "cgroup.events")) as f:
                if "populated 0" in f.read():
                    break
            time.sleep(0.05)
        return True

    def close(self):
        if self.path:
            try:
                os.rmdir(self.path)
            except OSError:
                pass


def threads(pid):
    """Each live thread of process pid as (tid, name, CPU ns so far, context switches so far):
    the CPU from /proc/PID/task/TID/schedstat, the scheduler's run time (stat's clock ticks where
    it is missing: ticks put a thread that runs a few ms every 10 s at 0 or 10 ms a window), the
    switches voluntary and involuntary from its status (each a wake-up: bench_wake.c). Threads
    gone meanwhile are left out."""
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        task = "/proc/%d/task/%s/" % (pid, tid)
        try:
            with open(task + "stat") as f:
                head, _, tail = f.read().rpartition(")")
            try:
                with open(task + "schedstat") as f:
                    ns = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                fields = tail.split()
                ns = (int(fields[11]) + int(fields[12])) * 10**9 // os.sysconf("SC_CLK_TCK")
            with open(task + "status") as f:
                switches = sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
        except OSError:
            continue
        out.append((int(tid), head.split("(", 1)[1], ns, switches))
    return out


def task_cpu_ns(pid):
    """CPU time of a single-threaded process in ns (/proc/PID/schedstat): with interrupt time
    not accounted apart (CONFIG_IRQ_TIME_ACCOUNTING unset), it includes the sampling interrupts
    that hit it."""
    with open("/proc/%d/schedstat" % pid) as f:
        return int(f.read().split()[0])


class Workload:
    def __init__(self, files, pids, idlers):
        self.files, self.pids, self.idlers = files, pids, idlers

    def roll_call(self):
        """Makes every idle process work ~100 ms at once (SIGUSR1, bench_idler.c), so profilers
        running now all meet them within their warm-up: their steady state then knows all of
        them. Takes about idlers x 0.1 s / CPUs of the CPUs' time, on the spinners' share."""
        for pid in self.idlers:
            os.kill(pid, signal.SIGUSR1)


@contextlib.contextmanager
def host_workload(idler, spinner, nidlers, tmp, churn=None, churn_rate=0, spin=True):
    """BPF run-time statistics on, nidlers mostly idle processes and one spinner per CPU (each
    counting its work in a file of tmp; none with spin=False) for the benchmark's life, and with
    churn_rate > 0 the
    churn program starting that many short-lived processes (`ls -l /usr/lib`) a second; yields
    a Workload (the spinners' files and pids). Everything is stopped and the statistics setting
    restored on the way out."""
    with bpf_stats():
        yield from _workload(idler, spinner, nidlers, tmp, churn, churn_rate, spin)


@contextlib.contextmanager
def bpf_stats():
    """BPF programs' run-time statistics on (kernel.bpf_stats_enabled=1) inside the block, the
    setting restored on the way out."""
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        old_stats = f.read().strip()
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    try:
        yield
    finally:
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=" + old_stats])


def _workload(idler, spinner, nidlers, tmp, churn, churn_rate, spin):
    workers = []
    try:
        for _ in range(nidlers):
            workers.append(subprocess.Popen([idler, "3"]))
        idlers = [w.pid for w in workers]
        files = [os.path.join(tmp, "spin%d" % i) for i in range(os.cpu_count() if spin else 0)]
        spinners = [subprocess.Popen([spinner, f, str(i)]) for i, f in enumerate(files)]
        workers += spinners
        if churn_rate > 0:
            workers.append(subprocess.Popen([churn, str(churn_rate), "/bin/ls", "-l", "/usr/lib"]))
        time.sleep(2)
        yield Workload(files, [p.pid for p in spinners], idlers)
    finally:
        for w in workers:
            w.kill()
        for w in workers:
            w.wait()
