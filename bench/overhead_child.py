"""``python -m bench.overhead_child COUNTS.jsonl crdscope-args...``: crdscope's CLI, its own counts reported.

Runs the real ``crdscope`` command line (``cli.main``) in this process.  Every cluster crdscope
builds counts its own requests and the bytes of their answers by path at its transport
(:class:`crdscope.connection.traffic.Traffic`, what the footprint probe reads); on SIGUSR1 this
appends one line ``{"requests": n, "bytes": b, "paths": {...}, "path_bytes": {...}}`` of those
counts to COUNTS.jsonl, so the benchmark reads them at the same moments as the server's metrics
and ``/proc``.  Nothing else differs from ``crdscope``.
"""

from __future__ import annotations

import json
import signal
import sys
from collections import Counter

#: Every cluster crdscope built in this process (the watch builds one; a spread client shares its counts).
CLUSTERS: list = []


def watch_clusters() -> None:
    """Remember each :class:`connection.cluster.Cluster` built from now on."""
    from crdscope.connection import cluster as cluster_module

    original = cluster_module.Cluster.__init__

    def remembered(self, *args, **kwargs) -> None:
        original(self, *args, **kwargs)
        CLUSTERS.append(self)

    cluster_module.Cluster.__init__ = remembered


def counts() -> dict:
    """The counts of every cluster's traffic, summed, keyed as the benchmark reads them."""
    paths: Counter = Counter()
    path_bytes: Counter = Counter()
    seen: set[int] = set()
    for cluster in CLUSTERS:
        traffic = cluster.traffic
        if id(traffic) in seen:  # the replica-spreading client shares its parent's counts
            continue
        seen.add(id(traffic))
        for (_, path), tally in traffic.by_origin_and_path().items():
            paths[path] += tally.requests
            path_bytes[path] += tally.bytes
    return {"requests": sum(paths.values()), "bytes": sum(path_bytes.values()),
            "paths": dict(paths), "path_bytes": dict(path_bytes)}


def main() -> None:
    counts_path, arguments = sys.argv[1], sys.argv[2:]

    def report(*_: object) -> None:
        with open(counts_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(counts()) + "\n")

    signal.signal(signal.SIGUSR1, report)
    watch_clusters()
    from crdscope.cli.main import cli

    cli(args=arguments, prog_name="crdscope")


if __name__ == "__main__":
    main()
