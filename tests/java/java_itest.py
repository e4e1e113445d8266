#!/usr/bin/env python3
"""The Java source against real JVMs of Debian's openjdk-17 (docs/java.md), one case a run:

  attach         a JVM is found and attached: JFR.check lists pfr's recording, it is dumped
                 every interval, its perf map is asked for (-XX:+PreserveFramePointer); after
                 the recorder stops no pfr recording and no file is left
  disabled       a JVM with -XX:+DisableAttachMechanism is a skip counted once, never signalled
                 (no thread dump on its stdout), and the recorder goes on
  no_answer      a JVM that never answers (stopped with SIGSTOP) is a counted skip after the
                 deadline; the recorder's intervals go on meanwhile; its trigger file is removed
  namespaced     a JVM running as nobody in its own mount and pid namespace with a private /tmp
                 is attached, dumped, and left clean; its CPU, allocation and lock profiles
                 are in the ring (read back with pfr --query)
  own_recording  a JVM that runs a recording of its own keeps it, untouched
  reload         java_profiler turned off by SIGHUP stops pfr's recording and removes its
                 files while the recorder runs on; turned on again, the JVM is recorded anew

JFR.check through the JDK's own jcmd is the oracle. Usage: java_itest.py CASE --recorder BIN
--jdk DIR --classes DIR. Needs root. Exit 0 = pass.
"""
import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "recorder"))
from recorder_itest import free_port  # noqa: E402

LIVE = []


def log(msg):
    print("[java_itest] %s" % msg, flush=True)


def fail(msg):
    raise AssertionError(msg)


class Recorder:
    def __init__(self, args, tmp, conf_text=None, interval="1"):
        """conf_text: the config file (then java_profiler is the file's, so a reload can
        change it); None: an empty one and --java-profiler enabled."""
        self.port = free_port()
        self.logpath = os.path.join(tmp, "recorder.log")
        self.store = os.path.join(tmp, "ring.db")
        self.logf = open(self.logpath, "w")
        self.conf = os.path.join(tmp, "recorder.ini")
        with open(self.conf, "w") as f:
            f.write(conf_text or "")
        # no local pprof discovery: these tests do not scrape, and a CPU profile of another
        # test's Go pprof server beside them made that test's own fail (one at a time in Go)
        cmd = [args.recorder, "--store", self.store, "--interval", interval,
               "--log-level", "debug", "--metrics-listen", "127.0.0.1:%d" % self.port,
               "--scrape-local", "off"]
        if conf_text is None:
            cmd += ["--java-profiler", "enabled"]
        conf = self.conf
        env = dict(os.environ, PFR_CONFIG=conf)
        log("starting: " + " ".join(cmd))
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT, env=env)
        LIVE.append(self.proc)
        self.wait(lambda: ": sampling with" in self.text(), 60, "the recorder to start")

    def text(self):
        with open(self.logpath) as f:
            return f.read()

    def metrics(self):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.port, timeout=5) as r:
                return r.read().decode()
        except OSError:
            return ""

    def metric(self, name, labels=""):
        m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), self.metrics(),
                      re.M)
        return float(m.group(1)) if m else None

    def wait(self, cond, timeout, what):
        end = time.time() + timeout
        while time.time() < end:
            if cond():
                return
            if self.proc.poll() is not None:
                fail("the recorder exited (%s) waiting for %s; log:\n%s"
                     % (self.proc.returncode, what, self.text()[-4000:]))
            time.sleep(0.1)
        fail("no %s within %d s; log:\n%s" % (what, timeout, self.text()[-4000:]))

    def jvm_lines(self, pid, needle):
        """The recorder's log lines about the JVM pid holding needle (the host may run other
        JVMs, which the recorder attaches too: host-wide counters do not tell about this one)."""
        head = "java: pid %d:" % pid
        return [ln for ln in self.text().splitlines() if head in ln and needle in ln]

    def wait_jvm(self, pid, needle, count, timeout):
        self.wait(lambda: len(self.jvm_lines(pid, needle)) >= count, timeout,
                  "%d log lines 'java: pid %d: ...%s'" % (count, pid, needle))

    def wait_metric(self, name, at_least, timeout, labels=""):
        self.wait(lambda: (self.metric(name, labels) or 0) >= at_least, timeout,
                  "%s%s >= %s" % (name, labels, at_least))

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=60)
        self.logf.close()
        if rc != 0:
            fail("the recorder exited %d; log:\n%s" % (rc, self.text()[-4000:]))


class Jvm:
    """The workload; prefix wraps the java command (setpriv, unshare)."""

    def __init__(self, args, tmp, flags=(), wrap=None):
        self.tag = "pfr-java-itest-%d-%s" % (os.getpid(), os.urandom(3).hex())
        self.outpath = os.path.join(tmp, "jvm-%s.out" % self.tag)
        java = os.path.join(args.jdk, "java")
        cmd = [java] + list(flags) + ["-cp", args.classes, "PfrJavaBusy", self.tag]
        if wrap:
            cmd = wrap(cmd)
        log("starting: " + " ".join(cmd))
        self.out = open(self.outpath, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        LIVE.append(self.proc)
        end = time.time() + 60
        while "ready" not in self.stdout():
            if time.time() > end or self.proc.poll() is not None:
                fail("the JVM did not start: %s" % self.stdout()[-2000:])
            time.sleep(0.1)
        self.pid = self.find_pid()
        log("JVM pid %d" % self.pid)

    def find_pid(self):
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    args = f.read().split(b"\0")
            except OSError:
                continue
            if self.tag.encode() in args and os.path.basename(args[0]) == b"java":
                return int(d)
        fail("no java process with tag %s" % self.tag)

    def stdout(self):
        with open(self.outpath) as f:
            return f.read()

    def tmp_files(self):
        """pfr's files and attach triggers for this JVM in its /tmp."""
        with open("/proc/%d/status" % self.pid) as f:
            nspid = f.read().split("NSpid:")[1].split("\n")[0].split()[-1]
        root = "/proc/%d/root/tmp" % self.pid
        return sorted(glob.glob("%s/pfr-jfr-%s-*" % (root, nspid)) +
                      glob.glob("%s/.attach_pid%s" % (root, nspid)))

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


def jfr_check(args, pid):
    out = subprocess.run([os.path.join(args.jdk, "jcmd"), str(pid), "JFR.check"],
                         capture_output=True, text=True, timeout=60)
    return out.stdout + out.stderr


def recordings(text):
    return re.findall(r"^Recording \d+: name=(\S+)", text, re.M)


def check_clean(args, jvm, rec=None):
    names = recordings(jfr_check(args, jvm.pid))
    about = rec.jvm_lines(jvm.pid, "") if rec else []
    if "pfr-recorder" in names:
        fail("pfr's recording left after the recorder stopped: %r; the recorder said: %r"
             % (names, about))
    left = jvm.tmp_files()
    if left:
        fail("files left in the JVM's /tmp: %r" % left)
    return names


def case_attach(args, tmp):
    jvm = Jvm(args, tmp, ["-XX:+PreserveFramePointer"])
    perfmap = "/tmp/perf-%d.map" % jvm.pid
    rec = Recorder(args, tmp)
    rec.wait_jvm(jvm.pid, ": recording, started in", 1, 60)
    rec.wait_jvm(jvm.pid, ": dump of ", 3, 60)
    # -XX:+PreserveFramePointer: the JVM was asked for its perf map (the CPU symbolizer's)
    rec.wait_jvm(jvm.pid, ": perf map asked for", 1, 10)
    if not os.path.isfile(perfmap) or os.path.getsize(perfmap) == 0:
        fail("no perf map %s" % perfmap)
    os.unlink(perfmap)  # the JVM never removes it
    names = recordings(jfr_check(args, jvm.pid))
    log("JFR.check while recording: %r" % names)
    if "pfr-recorder" not in names:
        fail("JFR.check does not list pfr's recording: %r" % names)
    if rec.jvm_lines(jvm.pid, ": dump: "):
        fail("dump errors: %r" % rec.jvm_lines(jvm.pid, ": dump: "))
    for line in rec.jvm_lines(jvm.pid, ""):
        log("recorder: " + line)
    rec.stop()
    log("after stop: recordings %r" % check_clean(args, jvm, rec))
    if "Full thread dump" in jvm.stdout():
        fail("the JVM printed a thread dump: SIGQUIT reached it without its trigger file")
    jvm.kill()


def case_disabled(args, tmp):
    jvm = Jvm(args, tmp, ["-XX:+DisableAttachMechanism"])
    rec = Recorder(args, tmp)
    rec.wait_jvm(jvm.pid, ": attach_disabled", 1, 60)
    rec.wait_metric("pfr_java_skips_total", 1, 10, '{reason="attach_disabled"}')
    time.sleep(4)  # a few more rounds: logged (and counted) once, never asked again
    if len(rec.jvm_lines(jvm.pid, ": attach_disabled")) != 1:
        fail("the skip was logged more than once")
    if rec.jvm_lines(jvm.pid, ": recording"):
        fail("attached to a JVM that disables attach")
    if "Full thread dump" in jvm.stdout():
        fail("the JVM was sent SIGQUIT (it printed a thread dump)")
    rec.stop()
    check_clean(args, jvm, rec)
    jvm.kill()


def case_no_answer(args, tmp):
    jvm = Jvm(args, tmp)
    os.kill(jvm.pid, signal.SIGSTOP)
    try:
        rec = Recorder(args, tmp)
        rec.wait_jvm(jvm.pid, ": no_answer", 1, 60)
        rec.wait_metric("pfr_java_skips_total", 1, 10, '{reason="no_answer"}')
        # the worker waited for the JVM, the java source's collections did not
        folded = rec.metric("pfr_source_intervals_folded_total", '{source="java"}')
        took = rec.metric("pfr_source_collect_seconds", '{source="java"}')
        log("java collections: %s folded, the last took %s s" % (folded, took))
        if folded is None or folded > 0 or took is None or took > 0.5:
            fail("the java source's collection waited for the JVM")
        if jvm.tmp_files():
            fail("trigger file left: %r" % jvm.tmp_files())
        rec.stop()
    finally:
        os.kill(jvm.pid, signal.SIGCONT)
    jvm.kill()


def case_namespaced(args, tmp):
    # the classes where nobody can read them, inside the JVM's own /tmp
    def wrap(cmd):
        inner = ("mount -t tmpfs -o mode=1777 pfr-java-tmp /tmp && cp -r %s /tmp/classes && "
                 "chmod -R a+rX /tmp/classes && exec setpriv --reuid=nobody --regid=nogroup "
                 "--clear-groups %s" % (args.classes, " ".join(
                     "/tmp/classes" if c == args.classes else c for c in cmd)))
        return ["unshare", "--mount", "--pid", "--fork", "--mount-proc", "sh", "-c", inner]

    jvm = Jvm(args, tmp, wrap=wrap)
    with open("/proc/%d/status" % jvm.pid) as f:
        st = f.read()
    nspid = st.split("NSpid:")[1].split("\n")[0].split()
    uid = int(st.split("Uid:")[1].split()[1])
    log("JVM pid %d, NSpid %r, uid %d" % (jvm.pid, nspid, uid))
    if len(nspid) < 2 or uid == 0:
        fail("the JVM is not in its own pid namespace as another user")
    if os.stat("/proc/%d/root/tmp" % jvm.pid).st_dev == os.stat("/tmp").st_dev:
        fail("the JVM's /tmp is the host's")
    rec = Recorder(args, tmp)
    rec.wait_jvm(jvm.pid, ": recording, started in", 1, 60)
    rec.wait_jvm(jvm.pid, ": dump of ", 3, 60)
    if rec.jvm_lines(jvm.pid, ": dump: "):
        fail("dump errors: %r" % rec.jvm_lines(jvm.pid, ": dump: "))
    if not rec.metric("pfr_java_credential_switches_total"):
        fail("no child took the JVM's credentials")
    names = recordings(jfr_check(args, jvm.pid))
    if "pfr-recorder" not in names:
        fail("JFR.check does not list pfr's recording: %r" % names)
    time.sleep(2.5)  # the last dump's profiles go out at the next collect
    rec.stop()
    check_clean(args, jvm, rec)
    jvm.kill()
    check_profiles(args, rec, jvm.pid, "PfrJavaBusy.spin", "PfrJavaBusy.contend")


def check_profiles(args, rec, pid, cpu_frame, lock_frame):
    """The JVM's Java profiles are in the recorder's ring, read back with pfr (by its pid)."""
    def pfr(*argv):
        out = subprocess.run([args.query, "--store", rec.store] + list(argv),
                             capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            fail("pfr %s: %s" % (" ".join(argv), out.stderr.strip()))
        return out.stdout
    svc = [s for s in json.loads(pfr("ls", "--format", "json", "--values", "1000"))["services"]
           if str(pid) in s["labels"].get("pid", [])]
    if len(svc) != 1:
        fail("no one service with the JVM's pid %d in the ring: %r" % (pid, svc))
    for t, frame in (("java:cpu:nanoseconds", cpu_frame),
                     ("java:heap_alloc_space:bytes", None),
                     ("java:lock_contentions:count", lock_frame)):
        stacks = pfr("flame", "--service", svc[0]["name"], "--type", t, "--label",
                     "pid=%d" % pid, "--format", "folded").splitlines()
        log("%s of pid %d in service %s: %d stacks" % (t, pid, svc[0]["name"], len(stacks)))
        if not stacks or (frame and not any(frame in st.split(" ")[0].split(";")
                                            for st in stacks)):
            fail("the ring's %s of pid %d has no %s: %r" % (t, pid, frame or "stack",
                                                             stacks[:5]))


def case_reload(args, tmp):
    jvm = Jvm(args, tmp)
    rec = Recorder(args, tmp, "[recorder]\njava_profiler = enabled\n")
    rec.wait_jvm(jvm.pid, ": dump of ", 2, 60)
    with open(rec.conf, "w") as f:
        f.write("[recorder]\njava_profiler = disabled\n")
    rec.proc.send_signal(signal.SIGHUP)
    rec.wait_jvm(jvm.pid, ": pfr's recording stopped", 1, 30)
    check_clean(args, jvm, rec)  # while the recorder still runs
    dumps = len(rec.jvm_lines(jvm.pid, ": dump of "))
    time.sleep(3)
    if len(rec.jvm_lines(jvm.pid, ": dump of ")) != dumps:
        fail("dumps went on after java_profiler was turned off")
    with open(rec.conf, "w") as f:
        f.write("[recorder]\njava_profiler = enabled\n")
    rec.proc.send_signal(signal.SIGHUP)
    rec.wait_jvm(jvm.pid, ": recording, started in", 2, 60)  # turned on again: found anew
    rec.stop()
    check_clean(args, jvm, rec)
    jvm.kill()


def case_own_recording(args, tmp):
    jvm = Jvm(args, tmp, ["-XX:StartFlightRecording=name=mine,settings=default"])
    before = recordings(jfr_check(args, jvm.pid))
    rec = Recorder(args, tmp)
    rec.wait_jvm(jvm.pid, ": recording, started in", 1, 60)
    if not rec.jvm_lines(jvm.pid, "(1 recording of its own kept)"):
        fail("the JVM's own recording was not seen: %r" % rec.jvm_lines(jvm.pid, ""))
    rec.wait_metric("pfr_java_jvms_with_own_recordings", 1, 10)
    rec.wait_jvm(jvm.pid, ": dump of ", 2, 60)
    during = recordings(jfr_check(args, jvm.pid))
    rec.stop()
    after = check_clean(args, jvm, rec)
    log("recordings before %r, during %r, after %r" % (before, during, after))
    if before != ["mine"] or sorted(during) != ["mine", "pfr-recorder"] or after != ["mine"]:
        fail("the JVM's own recording was not kept as it was")
    if "running" not in jfr_check(args, jvm.pid):
        fail("the JVM's own recording no longer runs")
    jvm.kill()


CASES = {"attach": case_attach, "disabled": case_disabled, "no_answer": case_no_answer,
         "namespaced": case_namespaced, "own_recording": case_own_recording,
         "reload": case_reload}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--recorder", required=True)
    ap.add_argument("--jdk", required=True)
    ap.add_argument("--classes", required=True)
    ap.add_argument("--query", help="pfr, the query tool (namespaced reads the ring with it)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("FAIL: needs root")
        return 1
    tmp = tempfile.mkdtemp(prefix="pfr-java-")
    try:
        CASES[args.case](args, tmp)
    except AssertionError as e:
        print("FAIL: %s" % e)
        return 1
    finally:
        for p in LIVE:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
