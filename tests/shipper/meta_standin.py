#!/usr/bin/env python3
"""Stand-ins for where container metadata lives on a real host, for the identity tests:
  --docker-socket PATH --docker-names FILE: Docker's API on a unix socket answering the inspect
      call (GET [/vX.Y]/containers/<id>/json) from FILE's "id name" lines, 404 for other ids;
  --kubelet-pods FILE --port-file F: the kubelet's GET /pods answering FILE (a PodList), on a
      free port of 127.0.0.1 written to F.
Every request is logged to stderr. Runs until killed."""
import argparse
import http.server
import json
import os
import re
import socketserver
import sys
import threading


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("standin: %s %s\n" % (self.server.kind, fmt % args))

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.server.kind == "docker":
            m = re.fullmatch(r"(/v[0-9.]+)?/containers/([0-9a-f]{64})/json", self.path)
            names = self.server.names
            if m and m.group(2) in names:
                self.answer(200, {"Id": m.group(2), "Name": "/" + names[m.group(2)],
                                  "Config": {"Labels": {}, "Env": ["PATH=/usr/bin"]}})
            else:
                self.answer(404, {"message": "No such container: %s" % self.path})
        elif self.path.split("?")[0] == "/pods":
            with open(self.server.pods) as f:
                self.answer(200, json.load(f))
        else:
            self.answer(404, {"message": "not found"})


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        conn, _ = super().get_request()
        return conn, ("local", 0)


class TCPServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--docker-socket")
    ap.add_argument("--docker-names")
    ap.add_argument("--kubelet-pods")
    ap.add_argument("--port-file")
    a = ap.parse_args()
    servers = []
    if a.docker_socket:
        if os.path.exists(a.docker_socket):
            os.unlink(a.docker_socket)
        s = UnixServer(a.docker_socket, Handler)
        s.kind = "docker"
        with open(a.docker_names) as f:
            s.names = dict(line.split() for line in f if line.strip())
        servers.append(s)
    if a.kubelet_pods:
        s = TCPServer(("127.0.0.1", 0), Handler)
        s.kind = "kubelet"
        s.pods = a.kubelet_pods
        servers.append(s)
        with open(a.port_file + ".tmp", "w") as f:
            f.write(str(s.server_address[1]))
        os.rename(a.port_file + ".tmp", a.port_file)
    for s in servers[1:]:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    servers[0].serve_forever()


if __name__ == "__main__":
    main()
