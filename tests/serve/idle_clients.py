#!/usr/bin/env python3
"""Idle connections cannot lock well-behaved clients out of `pfr serve`.

1. 16 connections from 127.0.0.1 (where every SSH tunnel arrives; 16 is the per-address limit)
   that send nothing, and reconnect as soon as the server closes one: requests from 127.0.0.1
   must still be answered, each within 2 s.
2. One silent connection from each of 200 loopback addresses (127.0.0.2 ... 127.0.0.201; 64 is
   the limit in all): a request from another address (127.0.0.1, then 127.0.0.250) must be
   answered within 2 s, and the connections the server closed for room must be the oldest.
Usage: idle_clients.py PFR MAKE_RING WORKDIR
"""
import http.client
import re
import select
import socket
import sys
import time

import serve_proc

FAILS = []
DEADLINE = 2.0  # seconds a well-behaved request may take


def fail(msg):
    FAILS.append(msg)
    print("FAIL: " + msg, flush=True)


def idle_conn(port, src):
    s = socket.socket()
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s


def closed_by_server(s):
    """True when the server has shut the connection down (EOF or reset is readable)."""
    r, _, _ = select.select([s], [], [], 0)
    if not r:
        return False
    try:
        return s.recv(1) == b""
    except OSError:
        return True


def get(port, path, src):
    """Status and seconds of GET path from address src; (None, seconds, error) on failure."""
    t = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(src, 0))
    try:
        c.request("GET", path, headers={"Host": "localhost"})
        r = c.getresponse()
        r.read()
        return r.status, time.monotonic() - t, ""
    except OSError as e:
        return None, time.monotonic() - t, str(e)
    finally:
        c.close()


def check_get(port, path, src, what):
    status, dt, err = get(port, path, src)
    print("%s: GET %s from %s: %s in %.0f ms" % (what, path, src, status or err, dt * 1e3),
          flush=True)
    if status != 200:
        fail("%s: GET %s from %s: %s" % (what, path, src, status or err))
    elif dt > DEADLINE:
        fail("%s: GET %s from %s took %.2f s" % (what, path, src, dt))
    return dt


def same_address(port):
    """16 silent connections from 127.0.0.1, kept at 16, while 127.0.0.1 asks 8 times."""
    idle = [idle_conn(port, "127.0.0.1") for _ in range(16)]
    time.sleep(0.3)  # the server has them all
    reconnects, lat = 0, []
    for i in range(8):
        lat.append(check_get(port, "/api/ls" if i % 2 else "/", "127.0.0.1", "same address"))
        for j, s in enumerate(idle):  # the attacker takes back every slot it lost
            if closed_by_server(s):
                s.close()
                idle[j] = idle_conn(port, "127.0.0.1")
                reconnects += 1
        time.sleep(0.1)
    print("same address: %d idle connections reopened; worst request %.0f ms"
          % (reconnects, max(lat) * 1e3), flush=True)
    if reconnects < 8:
        fail("only %d idle connections were closed for 8 requests" % reconnects)
    for s in idle:
        s.close()


def many_addresses(port):
    """One silent connection from each of 200 addresses, then requests from two others."""
    idle = [idle_conn(port, "127.0.0.%d" % (2 + i)) for i in range(200)]
    time.sleep(0.5)
    check_get(port, "/api/ls", "127.0.0.1", "200 addresses")
    check_get(port, "/", "127.0.0.250", "200 addresses")
    time.sleep(0.3)
    closed = [closed_by_server(s) for s in idle]
    kept = [i for i, c in enumerate(closed) if not c]
    print("200 addresses: %d of 200 idle connections still open (%s...%s)"
          % (len(kept), kept[0] if kept else "-", kept[-1] if kept else "-"), flush=True)
    if len(kept) > 64:
        fail("%d connections open, above the limit of 64" % len(kept))
    # The longest idle go first: whatever is still open is the newest.
    if kept and kept != list(range(200 - len(kept), 200)):
        fail("the connections closed for room were not the oldest: kept %s" % kept)
    for s in idle:
        s.close()


def main():
    pfr, make_ring, work = sys.argv[1:4]
    srv, port, log = serve_proc.start(pfr, make_ring, work, 20)
    try:
        if not port:
            fail("pfr serve printed no URL")
            return 1
        check_get(port, "/api/ls", "127.0.0.1", "alone")
        same_address(port)
        many_addresses(port)
    finally:
        srv.terminate()
        srv.wait(timeout=20)
    m = re.search(r"(\d+) idle ones for room, (\d+) refused", open(log).read())
    print("server: " + (m.group(0) if m else "no connection summary"), flush=True)
    if not m or int(m.group(1)) < 8 + 136:
        fail("the server's summary does not count the idle connections it closed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
