#!/usr/bin/env python3
"""Files a local attacker maps, under the real recorder held to the unit's MemoryMax.

Each variant is a small program run by nobody whose ELF sections lie: a compressed .debug_frame
declaring 1 GiB (a real zlib bomb of zeros, ~1 MB, with no .eh_frame so the unwind table
builder reads it), compressed .debug_info/.debug_line bombs (the symbolizer's DWARF), and
headers that declare more than the file holds. The recorder runs in a cgroup with
memory.max = 256 MiB (the packaged unit's MemoryMax; 1 GiB for a sanitized build, whose shadow
memory alone is ~200 MiB: a bomb inflated would still pass it): it must never be OOM-killed,
its intervals must stay on time, and its metrics must name what it refused. In the release
build (not --sanitized) its resident memory must also stay within its 64 MiB budget.

Usage: hostile_itest.py --recorder BIN --dump BIN --spin BIN [--sanitized]
"""
import argparse
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import recorder_itest as ri  # noqa: E402

INTERVAL = 1
SHF_COMPRESSED = 0x800
GIB = 1 << 30


def zlib_bomb(size):
    """An ELF compression header declaring size bytes, then a zlib stream of size zeros.

    Deflating 1 GiB takes seconds of CPU (inside this test's serial window, in both trees), so
    one MiB is deflated twice, each ended by a full flush: after a full flush the deflate state
    holds nothing of what came before, so the second MiB's bytes are every later MiB's too. The
    stream is the first MiB's, that block repeated, the final block and the Adler-32 of all the
    zeros: a valid zlib stream of size zeros (zlib checks the Adler-32 when it inflates)."""
    chunk = bytes(1 << 20)
    z = zlib.compressobj(9)
    first = z.compress(chunk) + z.flush(zlib.Z_FULL_FLUSH)
    block = z.compress(chunk) + z.flush(zlib.Z_FULL_FLUSH)
    final = z.flush()[:-4]  # the empty final block; its Adler-32 (of 2 MiB) replaced below
    n = size // len(chunk)
    adler = 1
    for _ in range(n):
        adler = zlib.adler32(chunk, adler)
    return (struct.pack("<IIQQ", 1, 0, size, 1) + first + block * (n - 1) + final
            + struct.pack(">I", adler))


def sections(data):
    """(name, header offset) of each section of an ELF64 file."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    str_off, = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)
    out = []
    for i in range(shnum):
        h = shoff + i * shentsize
        name_off, = struct.unpack_from("<I", data, h)
        end = data.index(b"\0", str_off + name_off)
        out.append((data[str_off + name_off:end].decode(), h))
    return out


def mark_compressed(path, names):
    data = bytearray(open(path, "rb").read())
    for name, h in sections(data):
        if name in names:
            flags, = struct.unpack_from("<Q", data, h + 8)
            struct.pack_into("<Q", data, h + 8, flags | SHF_COMPRESSED)
    open(path, "wb").write(data)


def make_variants(spin, tmp):
    bomb = os.path.join(tmp, "bomb.bin")
    with open(bomb, "wb") as f:
        f.write(zlib_bomb(GIB))
    out = {}
    # the unwind table builder's: no .eh_frame, a .debug_frame that inflates to 1 GiB
    p = os.path.join(tmp, "pfr-hostile-frame")
    subprocess.run(["objcopy", "--remove-section", ".eh_frame", "--remove-section",
                    ".eh_frame_hdr", "--remove-section", ".debug_frame",
                    "--add-section", ".debug_frame=" + bomb, spin, p], check=True)
    mark_compressed(p, {".debug_frame"})
    out["frame"] = p
    # the symbolizer's: its DWARF inflates to 1 GiB a section
    p = os.path.join(tmp, "pfr-hostile-dwarf")
    subprocess.run(["objcopy", "--remove-section", ".debug_info", "--remove-section",
                    ".debug_line", "--add-section", ".debug_info=" + bomb,
                    "--add-section", ".debug_line=" + bomb, spin, p], check=True)
    mark_compressed(p, {".debug_info", ".debug_line"})
    out["dwarf"] = p
    for p in out.values():
        os.chmod(p, 0o755)
        ri.log("%s: %d bytes" % (p, os.path.getsize(p)))
    return out


def mounts():
    with open("/proc/mounts") as f:
        return [line.split() for line in f]


def memory_cgroup(name, limit):
    """A child cgroup with the memory controller and the unit's limit: cgroup v2 when its memory
    controller is there (beside this process's own cgroup if need be), else v1's memory
    hierarchy. Returns (path, "v1" or "v2")."""
    limit = str(limit)
    v2 = next((m[1] for m in mounts() if m[2] == "cgroup2"), None)
    if v2 and "memory" in open(os.path.join(v2, "cgroup.controllers")).read().split():
        with open("/proc/self/cgroup") as f:
            own = [l.split("::", 1)[1].strip() for l in f if l.startswith("0::")][0]
        parent = os.path.join(v2, own.lstrip("/"))
        for _ in range(2):
            ctl = os.path.join(parent, "cgroup.subtree_control")
            try:
                with open(ctl, "w") as f:
                    f.write("+memory")
            except OSError:
                pass
            if "memory" in open(ctl).read().split():
                break
            parent = os.path.dirname(parent)
        cg = os.path.join(parent, name)
        os.mkdir(cg)
        write(cg, "memory.max", limit)
        write(cg, "memory.swap.max", "0")
        return cg, "v2"
    v1 = next((m[1] for m in mounts() if m[2] == "cgroup" and "memory" in m[3].split(",")), None)
    if not v1:
        raise RuntimeError("no cgroup memory controller (v2 or v1)")
    with open("/proc/self/cgroup") as f:
        own = [l.split(":", 2)[2].strip() for l in f if "memory" in l.split(":")[1].split(",")][0]
    cg = os.path.join(v1, own.lstrip("/"), name)
    os.mkdir(cg)
    write(cg, "memory.limit_in_bytes", limit)
    if os.path.exists(os.path.join(cg, "memory.memsw.limit_in_bytes")):
        write(cg, "memory.memsw.limit_in_bytes", limit)
    return cg, "v1"


def write(cg, fname, value):
    with open(os.path.join(cg, fname), "w") as f:
        f.write(value)


def cg_read(cg, fname, key=None):
    try:
        text = open(os.path.join(cg, fname)).read()
    except OSError:
        return None
    if key is None:
        return int(text.split()[0])
    m = re.search(r"^%s (\d+)$" % key, text, re.M)
    return int(m.group(1)) if m else None


def cg_oom_kills(cg, kind):
    return cg_read(cg, "memory.events" if kind == "v2" else "memory.oom_control", "oom_kill")


def cg_peak(cg, kind):
    return cg_read(cg, "memory.peak" if kind == "v2" else "memory.max_usage_in_bytes")


def metric_sum(text, name):
    vals = re.findall(r"^%s(?:\{[^}]*\})? (\S+)$" % re.escape(name), text, re.M)
    return sum(float(v) for v in vals)


def run(args, tmp, procs, cg, kind):
    variants = make_variants(args.spin, tmp)
    port = ri.free_port()
    store = os.path.join(tmp, "ring.db")
    logp = os.path.join(tmp, "recorder.log")
    env = dict(os.environ, PFR_CONFIG=ri.empty_config(tmp))
    if args.sanitized:
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    with open(logp, "w") as logf:
        rec = subprocess.Popen(["sh", "-c", 'echo $$ >"$0/cgroup.procs" && shift && exec "$@"',
                                cg, "x", args.recorder, "--store", store, "--interval",
                                str(INTERVAL), "--metrics-listen", "127.0.0.1:%d" % port],
                               stdout=logf, stderr=subprocess.STDOUT, env=env)
    ri.LIVE.append(rec)
    end = time.time() + 30
    while time.time() < end and ": sampling with" not in open(logp).read():
        if rec.poll() is not None:
            break
        time.sleep(0.1)
    if not ri.check(rec.poll() is None, "the recorder did not start"):
        return logp
    time.sleep(INTERVAL + 1.5)  # past the first (cold) interval
    for name, path in variants.items():
        procs.append(subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534",
                                       "--clear-groups", path, "25"]))
    slack = 2.0 if args.sanitized else 1.0
    hwm = [0]

    def watch():
        hwm[0] = max(hwm[0], ri.proc_status_kib(rec.pid, "VmHWM"))

    worst, looks = ri.lateness(args, store, INTERVAL, 20, watch)
    hwm = hwm[0]
    ri.check(rec.poll() is None, "the recorder died (exit %r)" % rec.poll())
    kills = cg_oom_kills(cg, kind)
    peak = cg_peak(cg, kind)
    ri.log("%d looks: worst lateness %.2f s; recorder VmHWM %d KiB; cgroup peak %s MiB, "
           "OOM kills %s" % (looks, worst, hwm, peak >> 20 if peak else "?", kills))
    ri.check(kills == 0, "the recorder was OOM-killed %s times" % kills)
    ri.check(worst <= slack, "an interval was written %.2f s late" % worst)
    if not args.sanitized:
        ri.check(hwm < 64 * 1024, "resident memory peaked at %d KiB, over the 64 MiB budget" % hwm)
    text = ri.fetch_metrics(port)
    unwind = metric_sum(text, "pfr_unwind_files_refused_total")
    symbols = metric_sum(text, "pfr_symbol_files_refused_total")
    ri.log("refused: unwind %s, symbols %s" % (unwind, symbols))
    for line in text.splitlines():
        if "refused_total{" in line and not line.endswith(" 0"):
            ri.log("  " + line)
    ri.check(unwind >= 1, "no unwind table was refused")
    ri.check(symbols >= 1, "no symbol file was refused")
    # the programs were still profiled, their frames named from .symtab
    chunks = ri.dump(args, store)
    for name, path in variants.items():
        base = os.path.basename(path)
        ss = [s for c in chunks for s in c["samples"] if s["comm"] == base[:15]]
        named = [s for s in ss if any(f["function"] == "pfr_hostile_leaf" for f in s["frames"])]
        ri.log("%s: %d samples, %d with pfr_hostile_leaf" % (base, len(ss), len(named)))
        ri.check(len(named) > 0, "%s was not profiled with its frames named" % base)
    rec.send_signal(signal.SIGTERM)
    rc = rec.wait(timeout=30)
    ri.check(rc == 0, "recorder exit code %d" % rc)
    return logp


def run_budget(args, tmp, procs):
    """A recorder whose memory budget is below what it needs: it degrades and says so, and
    still writes every interval (the release build; a sanitized one has no budget)."""
    port = ri.free_port()
    store = os.path.join(tmp, "ring.db")
    logp = os.path.join(tmp, "recorder.log")
    with open(logp, "w") as logf:
        rec = subprocess.Popen([args.recorder, "--store", store, "--interval", str(INTERVAL),
                                "--memory-budget", "8M", "--metrics-listen",
                                "127.0.0.1:%d" % port], stdout=logf, stderr=subprocess.STDOUT,
                               env=dict(os.environ, PFR_CONFIG=ri.empty_config(tmp)))
    ri.LIVE.append(rec)
    end = time.time() + 30
    while time.time() < end and ": sampling with" not in open(logp).read() and rec.poll() is None:
        time.sleep(0.1)
    time.sleep(1.5)  # measured (every second) and found over: then the program starts
    procs.append(subprocess.Popen([args.spin, "12"]))
    time.sleep(5)
    text = ri.fetch_metrics(port)
    budget = metric_sum(text, "pfr_memory_budget_bytes")
    level = metric_sum(text, "pfr_memory_budget_level")
    refused = metric_sum(text, "pfr_memory_refused_total")
    ri.log("budget %s, level %s, refused %s" % (budget, level, refused))
    chunks = ri.dump(args, store)
    ss = [s for c in chunks for s in c["samples"] if s["comm"] == "pfr-hostile-spi"]
    named = [s for s in ss if any(f["function"] == "pfr_hostile_leaf" for f in s["frames"])]
    ri.log("pfr-hostile-spin: %d samples, %d named" % (len(ss), len(named)))
    ri.check(len(ss) > 0, "the program was not profiled")
    if args.sanitized:
        ri.check(budget == 0 and level == 0, "a sanitized recorder has a memory budget")
    else:
        ri.check(budget == 8 << 20, "budget %s, not 8 MiB" % budget)
        ri.check(level == 2, "level %s: not over an 8 MiB budget" % level)
        ri.check(refused >= 1, "nothing refused for the budget")
        ri.check(not named, "frames were named over the budget (its symbol table was paid for)")
        ri.check("over the 8.0 MiB budget" in open(logp).read(), "no log line for the budget")
    rec.send_signal(signal.SIGTERM)
    ri.check(rec.wait(timeout=30) == 0, "recorder exit code")
    return logp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--recorder", required=True)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--spin", required=True)
    ap.add_argument("--sanitized", action="store_true")
    ap.add_argument("--budget", action="store_true", help="the memory budget's check instead")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="pfr-hostile-")
    os.chmod(tmp, 0o755)
    procs, cg = [], None
    try:
        if args.budget:
            run_budget(args, tmp, procs)
        else:
            limit = (1 << 30) if args.sanitized else (256 << 20)
            cg, kind = memory_cgroup(os.path.basename(tmp), limit)
            run(args, tmp, procs, cg, kind)
    except Exception as e:  # a crash of the harness is a failure with its reason
        ri.FAILURES.append(repr(e))
        print("ERROR: %r" % e, flush=True)
    finally:
        ri.kill_all(procs + ri.LIVE)
        if cg:
            for _ in range(50):
                try:
                    os.rmdir(cg)
                    break
                except OSError:
                    time.sleep(0.1)
    return ri.verdict(tmp)


if __name__ == "__main__":
    sys.exit(main())
