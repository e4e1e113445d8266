"""A real `pfr serve` for the Python tests: a ring made by query_make_ring (or a given one), the
server on a free loopback port, its output in WORKDIR/serve.out."""
import os
import re
import subprocess
import time


def start(pfr, make_ring, work, chunks):
    """(process, port, log path); port None when the server printed no URL within 10 s."""
    os.makedirs(work, exist_ok=True)
    ring = os.path.join(work, "ring.db")
    if os.path.exists(ring):
        os.unlink(ring)
    subprocess.run([make_ring, ring, "shift", "--chunks", str(chunks), "--start", "1714564800"],
                   check=True, stdout=subprocess.DEVNULL)
    return serve(pfr, ring, work)


def serve(pfr, ring, work):
    """`pfr serve` on the ring file ring: (process, port, log path) as start() gives them."""
    log = os.path.join(work, "serve.out")
    with open(log, "w") as out:
        srv = subprocess.Popen([pfr, "--store", ring, "serve", "--listen", "127.0.0.1:0"],
                               stdout=out, stderr=subprocess.STDOUT)
    for _ in range(100):
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", open(log).read())
        if m:
            return srv, int(m.group(1)), log
        time.sleep(0.1)
    return srv, None, log
