"""Ground-truth workloads for pfr's Python frames (tests/python/python_itest.py).

Usage: py_truth.py MODE SECONDS
  split    hot_a() three times for each hot_b(), for SECONDS of CPU time: prints the split the
           program timed itself
  recurse  rec() 200 levels deep, spinning at the bottom
  sorted   sorted(key=keyfn): Python -> C (the sort) -> Python (the key)
  thread   a thread hashing with the GIL released (hash_worker) beside a main thread
           spinning in Python (main_spin)
  churn    code objects made and freed all the time: functions churn_N compiled, run for a
           few milliseconds and dropped (their code objects freed, their memory reused)
The lines the test checks are marked with "# L:" comments.
"""
import hashlib
import sys
import threading
import time

pc = time.perf_counter


def hot_a(n):
    x = 0
    for i in range(n):
        x += i * i  # L:hot_a
    return x


def hot_b(n):
    x = 0
    for i in range(n):
        x += i * i  # L:hot_b
    return x


def split(secs):
    # CPU time, not wall time: on a busy machine the program gets its samples all the same
    cpu = time.process_time
    ta = tb = 0.0
    end = cpu() + secs
    while cpu() < end:
        t0 = cpu()
        hot_a(30000)  # L:call_a
        hot_a(30000)  # L:call_a
        hot_a(30000)  # L:call_a
        t1 = cpu()
        hot_b(30000)  # L:call_b
        t2 = cpu()
        ta += t1 - t0
        tb += t2 - t1
    print("own split a/(a+b) %.2f" % (100 * ta / (ta + tb)), flush=True)


def spin(end):
    x = 0
    while pc() < end:
        x += 1  # L:spin
    return x


def rec(n, end):
    if n == 0:
        return spin(end)
    return rec(n - 1, end)  # L:rec


def recurse(secs):
    end = pc() + secs
    while pc() < end:
        rec(199, min(end, pc() + 0.5))


def keyfn(v):
    x = 0
    for i in range(200):
        x += i ^ v  # L:keyfn
    return x


def use_sorted(secs):
    end = pc() + secs
    data = list(range(2000))
    while pc() < end:
        sorted(data, key=keyfn)  # L:sorted


def hash_worker(end):
    buf = b"x" * (1 << 22)
    while pc() < end:
        hashlib.sha256(buf).digest()  # L:hash


def main_spin(end):
    x = 0
    while pc() < end:
        x += 1  # L:main_spin


def threads(secs):
    end = pc() + secs
    t = threading.Thread(target=hash_worker, args=(end,))
    t.start()
    main_spin(end)
    t.join()


def churn(secs):
    end = pc() + secs
    n = 0
    while pc() < end:
        ns = {}
        exec("def churn_%d(end):\n    x = 0\n    while time.perf_counter() < end:\n"
             "        x += 1\n    return x\n" % n, {"time": time}, ns)
        ns["churn_%d" % n](pc() + 0.003)
        n += 1


MODES = {"churn": churn, "split": split, "recurse": recurse, "sorted": use_sorted, "thread": threads}

if __name__ == "__main__":
    MODES[sys.argv[1]](float(sys.argv[2]))
