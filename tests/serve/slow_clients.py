#!/usr/bin/env python3
"""`pfr serve` keeps answering while slow clients try to starve it.

80 clients connect from 127.0.0.2 and send their request a byte a second (a request that would
take minutes to arrive). Meanwhile a normal client on 127.0.0.1 asks for the page and the API
every 0.2 s. Every normal request must succeed, its latency stay close to the same requests'
without the slow clients (measured first, in the same run), and the slow connections must be
cut once past the request deadline (10 s) instead of holding their slots.
Usage: slow_clients.py PFR MAKE_RING WORKDIR
"""
import socket
import sys
import threading
import time
import urllib.request

import serve_proc

SLOW = 80
FAILS = []


def fail(msg):
    FAILS.append(msg)
    print("FAIL: " + msg, flush=True)


def timed_get(url):
    t = time.monotonic()
    with urllib.request.urlopen(url, timeout=10) as r:
        r.read()
        status = r.status
    return status, time.monotonic() - t


def probe(base, seconds):
    """Latencies of normal requests (page + API) for this long; failures are recorded."""
    lat, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        for path in ("", "api/ls"):
            try:
                status, dt = timed_get(base + path)
                if status != 200:
                    fail("GET /%s: HTTP %d" % (path, status))
                lat.append(dt)
            except Exception as e:  # a reset or a timeout: the slots were starved
                fail("GET /%s: %s" % (path, e))
        time.sleep(0.2)
    return sorted(lat)


def slow_client(port, results, i):
    """Connect from 127.0.0.2 and dribble a request; record how long the server kept us."""
    s = socket.socket()
    s.settimeout(60)
    try:
        s.bind(("127.0.0.2", 0))
        s.connect(("127.0.0.1", port))
    except OSError as e:
        results[i] = ("refused", 0.0, str(e))
        return
    req = b"GET /api/ls HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"x" * 100
    t = time.monotonic()
    try:
        for b in req:
            s.sendall(bytes([b]))
            time.sleep(1.0)
        results[i] = ("kept", time.monotonic() - t, "")
    except OSError as e:
        results[i] = ("cut", time.monotonic() - t, str(e))
    finally:
        s.close()


def pct(v, p):
    return v[min(len(v) - 1, int(len(v) * p))] if v else float("nan")


def main():
    pfr, make_ring, work = sys.argv[1:4]
    srv, port, _ = serve_proc.start(pfr, make_ring, work, 60)
    try:
        if not port:
            fail("pfr serve printed no URL")
            return 1
        base = "http://127.0.0.1:%d/" % port

        before = probe(base, 4)
        results = [None] * SLOW
        threads = [threading.Thread(target=slow_client, args=(port, results, i), daemon=True)
                   for i in range(SLOW)]
        for t in threads:
            t.start()
        time.sleep(1)
        during = probe(base, 14)
        end = time.monotonic() + 10  # past the 10 s deadline by now: all should be cut
        for t in threads:
            t.join(timeout=max(0.1, end - time.monotonic()))
        kinds = {}
        for r in results:
            k = r[0] if r else "kept"  # still dribbling: the server kept it
            kinds[k] = kinds.get(k, 0) + 1
        cut = [r[1] for r in results if r and r[0] == "cut"]
        print("normal requests: before p50 %.1f ms p95 %.1f ms (%d); with %d slow clients "
              "p50 %.1f ms p95 %.1f ms (%d)" % (pct(before, .5) * 1e3, pct(before, .95) * 1e3,
                                                len(before), SLOW, pct(during, .5) * 1e3,
                                                pct(during, .95) * 1e3, len(during)))
        print("slow clients: %s; cut after %.1f-%.1f s" % (
            kinds, min(cut) if cut else -1, max(cut) if cut else -1))
        if pct(during, .95) > max(0.5, 5 * pct(before, .95)):
            fail("normal requests slowed down: p95 %.0f ms, %.0f ms without slow clients"
                 % (pct(during, .95) * 1e3, pct(before, .95) * 1e3))
        if kinds.get("kept", 0):
            fail("%d slow clients were still connected 25 s after they started" % kinds["kept"])
        if cut and max(cut) > 15:
            fail("a slow client was cut only after %.1f s (the deadline is 10 s)" % max(cut))
        if not cut:
            fail("no slow client was ever connected and cut")
    finally:
        srv.terminate()
        srv.wait(timeout=20)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
