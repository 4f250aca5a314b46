"""A tiny stand-in API server on 127.0.0.1 for answers a real one will not give on demand.

Run as ``python -m tests.faults.standin_server MODE PORT_FILE``; it writes its
port to PORT_FILE once listening.  Modes:

* ``big``: ``/metrics`` is ~100 MB (a few families the probes want, then an
  unwanted histogram repeated), generated as it is sent; ``/api`` and
  ``/apis`` are aggregated discovery documents, ``/apis`` with 10,000
  group-versions (5,000 groups of two versions, two resources each).
* ``trickle``: every path answers 200 with headers at once, then its body at
  one byte a second.

The only stand-in server of the test suite: everything else talks to the lab.
"""

from __future__ import annotations

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

METRICS_BYTES = 100 * 1000 * 1000
GROUPS = 5000
VERSIONS = ("v1", "v1beta1")
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
HEAD = (b"# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes 1.234e+09\n"
        b"# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1.7e+09\n"
        b"# TYPE go_goroutines gauge\ngo_goroutines 4321\n"
        b"# TYPE apiserver_request_duration_seconds histogram\n")
FILLER = (b'apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="g%06d.example.com",'
          b'resource="widgets",scope="cluster",subresource="",verb="LIST",version="v1",le="0.05"} 12345\n')


def resource(group: str, version: str, plural: str) -> dict:
    kind = plural.capitalize()[:-1]
    return {"resource": plural, "responseKind": {"group": group, "version": version, "kind": kind},
            "scope": "Cluster", "singularResource": plural[:-1], "verbs": ["get", "list", "watch", "create"],
            "categories": ["crossplane", "managed"],
            "subresources": [{"subresource": "status", "responseKind": {"group": group, "version": version,
                                                                         "kind": kind}, "verbs": ["get", "patch"]}]}


def discovery(groups: int) -> bytes:
    items = []
    for index in range(groups):
        group = f"g{index:05d}.stand-in.crdscope.test"
        items.append({"metadata": {"name": group}, "versions": [
            {"version": version, "freshness": "Current",
             "resources": [resource(group, version, "widgets"), resource(group, version, "gadgets")]}
            for version in VERSIONS]})
    return json.dumps({"apiVersion": "apidiscovery.k8s.io/v2", "kind": "APIGroupDiscoveryList",
                       "metadata": {}, "items": items}).encode()


CORE = json.dumps({"apiVersion": "apidiscovery.k8s.io/v2", "kind": "APIGroupDiscoveryList", "metadata": {},
                   "items": [{"metadata": {"name": ""}, "versions": [{"version": "v1", "freshness": "Current",
                              "resources": [resource("", "v1", "namespaces")]}]}]}).encode()


class Handler(BaseHTTPRequestHandler):
    mode = "big"
    apis = b""

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if self.mode == "trickle":
            body = b'{"gitVersion": "v1.37.2", "major": "1", "minor": "37"}' + b" " * 1000
            self._headers(200, "application/json", len(body))
            for byte in body:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(1.0)  # deliberate: this stand-in IS the byte-a-second trickling server under test
            return
        if path == "/metrics":
            lines = (METRICS_BYTES - len(HEAD)) // len(FILLER % 0)
            self._headers(200, "text/plain; version=0.0.4", len(HEAD) + lines * len(FILLER % 0))
            self.wfile.write(HEAD)
            batch = 10000
            for start in range(0, lines, batch):
                self.wfile.write(b"".join(FILLER % (i % 1000000) for i in range(start, min(lines, start + batch))))
            return
        if path in ("/api", "/apis"):
            body = CORE if path == "/api" else self.apis
            self._headers(200, AGGREGATED, len(body))
            self.wfile.write(body)
            return
        self._headers(404, "application/json", 2)
        self.wfile.write(b"{}")

    def _headers(self, status: int, content_type: str, length: int) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(length))
        self.end_headers()


def main() -> None:
    mode, port_file = sys.argv[1], Path(sys.argv[2])
    Handler.mode = mode
    if mode == "big":
        Handler.apis = discovery(GROUPS)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    port_file.write_text(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    main()
