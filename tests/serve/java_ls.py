#!/usr/bin/env python3
"""`pfr serve` lists the Java profiles: on the ring slice the recorder made of a real JVM (ctest
java_profiles leaves it, with its JSON: service and labels), /api/ls names the JVM's service
with the five Java types beside its eBPF CPU, the application's labels, and opens on it.
Usage: java_ls.py PFR RING WORKDIR"""
import json
import os
import shutil
import sys
import urllib.request

import serve_proc

WANT_TYPES = ["ebpf:cpu:nanoseconds", "java:cpu:nanoseconds", "java:heap_alloc_objects:count",
              "java:heap_alloc_space:bytes", "java:lock_contentions:count",
              "java:lock_delay:nanoseconds"]


def main():
    pfr, ring, work = sys.argv[1:4]
    if not os.path.isfile(ring) or not os.path.getsize(ring) or not os.path.exists(ring + ".json"):
        sys.exit("FAIL: no Java ring slice %s (ctest java_profiles makes it)" % ring)
    meta = json.load(open(ring + ".json"))
    os.makedirs(work, exist_ok=True)
    copy = os.path.join(work, "ring.db")
    shutil.copyfile(ring, copy)
    srv, port, log = serve_proc.serve(pfr, copy, work)
    try:
        if port is None:
            sys.exit("FAIL: pfr serve printed no URL: " + open(log).read()[-500:])
        with urllib.request.urlopen("http://127.0.0.1:%d/api/ls" % port, timeout=20) as r:
            ls = json.load(r)
    finally:
        srv.terminate()
        srv.wait()
    svcs = {s["name"]: s for s in ls["ls"]["services"]}
    svc = svcs.get(meta["service"])
    if svc is None:
        sys.exit("FAIL: /api/ls lists %s, not %s" % (sorted(svcs), meta["service"]))
    if sorted(svc["types"]) != WANT_TYPES:
        sys.exit("FAIL: %s has types %s, want %s" % (meta["service"], svc["types"], WANT_TYPES))
    for k in ("container.id", "host.name"):
        if svc["labels"].get(k) != [meta["labels"][k]]:
            sys.exit("FAIL: label %s is %s, want [%s]" % (k, svc["labels"].get(k),
                                                          meta["labels"][k]))
    if ls["busiest"] != meta["service"]:
        sys.exit("FAIL: the page opens on %s, not the JVM's %s" % (ls["busiest"], meta["service"]))
    print("PASS: %s: %s" % (meta["service"], ", ".join(svc["types"])))


if __name__ == "__main__":
    main()
