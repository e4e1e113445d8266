"""Ground-truth workloads for pfr's Python frames (tests/python/python_itest.py).

Usage: py_truth.py MODE SECONDS
  split    hot_a() three times for each hot_b(), for SECONDS of CPU time, each call of a random
           length: prints the split of the work (the two functions' iterations: the same code,
           so the same CPU time for each), the split the program timed itself, and the split
           an in-process oracle saw: a profiling timer looking at the main thread with
           sys._current_frames() (oracle_sampler, 200 Hz of CPU time)
  recurse  rec() 200 levels deep, spinning at the bottom
  sorted   sorted(key=keyfn): Python -> C (the sort) -> Python (the key)
  thread   a thread hashing with the GIL released (hash_worker) beside a main thread
           spinning in Python (main_spin)
  gen      the hot work in a generator (gen_hot) driven by gen_consumer
  asyncio  two asyncio tasks (worker_a, worker_b) awaiting a coroutine (crunch) that does the
           work
  churn    code objects made and freed all the time: functions churn_N compiled, run for a
           few milliseconds and dropped (their code objects freed, their memory reused)
The lines the test checks are marked with "# L:" comments.
"""
import asyncio
import hashlib
import random
import signal
import sys
import threading
import time

# The modes run for SECONDS of the process's CPU time, not of the wall clock: on a busy host
# (the suite beside CPU hogs) they still get the samples the checks count. churn alone runs by
# the wall clock (its functions run 3 ms each, and it is killed, not waited for).
cpu_now = time.process_time
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


def start_oracle(counts):
    """The in-process oracle: a profiling timer (ITIMER_PROF, 200 Hz of the process's CPU time)
    whose handler looks at the main thread with sys._current_frames(). Not a sampling thread:
    a thread must take the GIL to look, and under CPU contention it then sees the main thread
    where it hands the GIL over, not where its CPU time goes (measured beside two CPU hogs:
    83 % hot_a against the program's own 75 %; the timer: 75 %).

    The kernel checks CPU-time timers at its ticks only, so the oracle samples at ticks: see
    split for what that asks of the program."""
    main_id = threading.main_thread().ident

    def oracle_sampler(_signum, _frame):
        # the main thread's frames start with this handler's: its caller is what ran
        f = sys._current_frames()[main_id].f_back
        name = f.f_code.co_name if f is not None else ""
        if name in counts:
            counts[name] += 1

    signal.signal(signal.SIGPROF, oracle_sampler)
    signal.setitimer(signal.ITIMER_PROF, 0.005, 0.005)


def split(secs):
    counts = {"hot_a": 0, "hot_b": 0}
    start_oracle(counts)
    # Calls of random lengths (the same for both functions). The oracle samples at the kernel's
    # ticks: with calls of one length (a loop of ~4 ms, about a tick) it saw the same function
    # tick after tick when the process ran a tick at a time beside CPU hogs (66.8 % hot_a one
    # run, 81 % another). While its timer is armed the kernel also reads the process's CPU clock
    # at ticks only, so the program's own timing is a tick sample like the oracle (the thread's
    # clock is exact, but reading it moves the timer's clock on and so tilts the oracle: 97 %).
    # The work split is the truth the test holds pfr to.
    rng = random.Random(34)
    lengths = [rng.randint(20000, 40000) for _ in range(4096)]
    cpu = cpu_now
    ta = tb = 0.0
    j = wa = wb = 0
    end = cpu() + secs
    while cpu() < end:
        a1, a2, a3, b1 = lengths[j:j + 4]
        j = (j + 4) % len(lengths)
        t0 = cpu()
        hot_a(a1)  # L:call_a
        hot_a(a2)  # L:call_a
        hot_a(a3)  # L:call_a
        t1 = cpu()
        hot_b(b1)  # L:call_b
        t2 = cpu()
        ta += t1 - t0
        tb += t2 - t1
        wa += a1 + a2 + a3
        wb += b1
    signal.setitimer(signal.ITIMER_PROF, 0, 0)
    print("work split a/(a+b) %.2f" % (100 * wa / (wa + wb)), flush=True)
    print("own split a/(a+b) %.2f" % (100 * ta / (ta + tb)), flush=True)
    n = counts["hot_a"] + counts["hot_b"]
    print("oracle split a/(a+b) %.2f of %d" % (100 * counts["hot_a"] / max(1, n), n), flush=True)


def spin(end):
    x = 0
    while cpu_now() < end:  # a system call: looked at every thousand steps
        for _ in range(1000):
            x += 1  # L:spin
    return x


def rec(n, end):
    if n == 0:
        return spin(end)
    return rec(n - 1, end)  # L:rec


def recurse(secs):
    end = cpu_now() + secs
    while cpu_now() < end:
        rec(199, min(end, cpu_now() + 0.5))


def keyfn(v):
    x = 0
    for i in range(200):
        x += i ^ v  # L:keyfn
    return x


def use_sorted(secs):
    end = cpu_now() + secs
    data = list(range(2000))
    while cpu_now() < end:
        sorted(data, key=keyfn)  # L:sorted


def hash_worker(end):
    buf = b"x" * (1 << 22)
    while cpu_now() < end:
        hashlib.sha256(buf).digest()  # L:hash


def main_spin(end):
    x = 0
    while cpu_now() < end:
        for _ in range(1000):
            x += 1  # L:main_spin


def threads(secs):
    end = cpu_now() + secs
    t = threading.Thread(target=hash_worker, args=(end,))
    t.start()
    main_spin(end)
    t.join()


def gen_hot(n):
    while True:
        x = 0
        for i in range(n):
            x += i * i  # L:gen_hot
        yield x


def gen_consumer(secs):
    end = cpu_now() + secs
    g = gen_hot(20000)
    while cpu_now() < end:
        next(g)  # L:gen_next


async def crunch(n):
    x = 0
    for i in range(n):
        x += i * i  # L:crunch
    return x


async def worker_a(end):
    while cpu_now() < end:
        await crunch(30000)  # L:await_a
        await asyncio.sleep(0)


async def worker_b(end):
    while cpu_now() < end:
        await crunch(30000)  # L:await_b
        await asyncio.sleep(0)


def use_asyncio(secs):
    async def both():
        end = cpu_now() + secs
        await asyncio.gather(worker_a(end), worker_b(end))
    asyncio.run(both())


def churn(secs):
    end = pc() + secs
    n = 0
    while pc() < end:
        ns = {}
        exec("def churn_%d(end):\n    x = 0\n    while time.perf_counter() < end:\n"
             "        x += 1\n    return x\n" % n, {"time": time}, ns)
        ns["churn_%d" % n](pc() + 0.003)
        n += 1


MODES = {"gen": gen_consumer, "asyncio": use_asyncio, "churn": churn, "split": split, "recurse": recurse, "sorted": use_sorted, "thread": threads}

if __name__ == "__main__":
    MODES[sys.argv[1]](float(sys.argv[2]))
