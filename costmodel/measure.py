"""Measure on a real API server the figures the model predicts, and compare the two.

Used by ``python -m bench calibrate`` (fitting) and ``crdscope estimate --measure``
(checking).  Synchronous and blocking: both run outside any event loop, against a
lab whose address and client TLS they are given.
"""

from __future__ import annotations

import os
import ssl
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from crdscope.connection.discovery_docs import ACCEPT_AGGREGATED, ACCEPT_LEGACY
from crdscope.connection.metrics import parse_text

from .model import Estimate

MEMORY_READS = 3
#: The goals of issue 37 for CRDs the model never saw: memory held within 15%, install time within 30%.
MEMORY_GOAL, INSTALL_GOAL = 0.15, 0.30
MEMORY_HELD = "memory held (heap after GC)"
MEMORY_READ_GAP_SECONDS = 2.0
CLOCK_TICKS = float(os.sysconf("SC_CLK_TCK"))
#: A freshly loaded API server keeps a core busy for a while (OpenAPI aggregation); figures are
#: read once it uses less than this share of one core over IDLE_WINDOW_SECONDS.
IDLE_CORE_FRACTION = 0.25
IDLE_WINDOW_SECONDS = 5.0
V2_ATTEMPTS = 3


MEMORY_GAUGES = ("process_resident_memory_bytes", "go_memstats_heap_inuse_bytes")
#: The API server's heap profile, with ``gc=1``: the Go runtime collects garbage before it answers
#: (kube-apiserver serves /debug/pprof by default, ``--profiling``; a cluster-admin may read it).
FORCED_GC_PATH = "/debug/pprof/heap?gc=1"


def _memory(client: httpx.Client) -> dict[str, float | None]:
    """Median resident memory and heap in use over a few reads (the heap moves with each GC), then
    the heap the server holds: heap in use right after a collection it was made to run.

    Resident memory is read first, untouched, because it is what a memory limit counts; but the same
    install moved it 22% from one run to the next (1.33, 2026-12-06), with the heap in use after a
    forced collection 1.3% apart on the same two servers: what the CRDs hold, without the garbage
    and the pages the runtime has not yet given back.
    """
    rss, heap = [], []
    for read in range(MEMORY_READS):
        if read:
            time.sleep(MEMORY_READ_GAP_SECONDS)
        scrape = parse_text(client.get("/metrics").content, MEMORY_GAUGES)
        rss.append(scrape.value("process_resident_memory_bytes") or 0.0)
        heap.append(scrape.value("go_memstats_heap_inuse_bytes") or 0.0)
    return {"rss_bytes": statistics.median(rss), "heap_bytes": statistics.median(heap),
            "live_heap_bytes": _live_heap(client)}


def _live_heap(client: httpx.Client) -> float | None:
    """Median heap in use right after a forced collection (None: the server serves no profile)."""
    live = []
    for _ in range(MEMORY_READS):
        with client.stream("GET", FORCED_GC_PATH) as answer:
            if answer.status_code != 200:
                return None
            for _chunk in answer.iter_bytes():  # the profile itself is not wanted, only its GC
                pass
        live.append(parse_text(client.get("/metrics").content, MEMORY_GAUGES).value("go_memstats_heap_inuse_bytes"))
    known = [value for value in live if value is not None]
    return statistics.median(known) if known else None


def _aggregated(client: httpx.Client) -> dict[str, Any]:
    total, group_versions, resources = 0, 0, 0
    for path in ("/api", "/apis"):
        response = client.get(path, headers={"Accept": ACCEPT_AGGREGATED})
        response.raise_for_status()
        if "APIGroupDiscoveryList" not in response.headers.get("content-type", ""):
            # A server without aggregated discovery (1.26 by default) answers the legacy document.
            return {"aggregated_bytes": None, "aggregated_group_versions": None, "aggregated_resources": None}
        total += len(response.content)
        for group in response.json().get("items") or []:
            for version in group.get("versions") or []:
                group_versions += 1
                resources += len(version.get("resources") or [])
    return {"aggregated_bytes": total, "aggregated_group_versions": group_versions,
            "aggregated_resources": resources}


def _legacy(client: httpx.Client) -> dict[str, Any]:
    """The legacy walk, one request at a time: how many, their bytes and their median latency."""
    api = client.get("/api", headers={"Accept": ACCEPT_LEGACY}).json()
    apis = client.get("/apis", headers={"Accept": ACCEPT_LEGACY}).json()
    paths = ["/api", "/apis", *(f"/api/{version}" for version in api.get("versions") or [])]
    paths += [f"/apis/{v['groupVersion']}" for group in apis.get("groups") or [] for v in group.get("versions") or []]
    seconds, total = [], 0
    for path in paths:
        started = time.perf_counter()
        response = client.get(path, headers={"Accept": ACCEPT_LEGACY})
        seconds.append(time.perf_counter() - started)
        total += len(response.content)
    return {"legacy_requests": len(paths), "legacy_bytes": total,
            "legacy_request_seconds_median": statistics.median(seconds)}


def _openapi(client: httpx.Client) -> dict[str, Any]:
    """The v3 index's paths and the v2 document's size.  Building v2 for hundreds of CRDs can
    outlast the server's request timeout on a busy machine (504): a few tries, then None."""
    index = client.get("/openapi/v3").json()
    v2_bytes = None
    for _ in range(V2_ATTEMPTS):
        try:
            v2 = client.get("/openapi/v2", headers={"Accept": "application/json"}, timeout=600)
        except httpx.HTTPError:
            continue
        if v2.status_code == 200:
            v2_bytes = len(v2.content)
            break
    return {"openapi_v3_paths": len(index.get("paths") or {}), "openapi_v2_bytes": v2_bytes}


def snapshot(server: str, tls: ssl.SSLContext, etcd_connections: Callable[[], int | None]) -> dict[str, Any]:
    """Every figure the model predicts, read from the API server as it is now."""
    with httpx.Client(base_url=server, verify=tls, timeout=300) as client:
        figures: dict[str, Any] = {"when": time.time()}
        figures.update(_memory(client))
        figures.update(_aggregated(client))
        figures.update(_legacy(client))
        figures.update(_openapi(client))
    figures["etcd_connections"] = etcd_connections()
    return figures


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def wait_until_idle(pid: int, timeout: float = 600.0) -> float:
    """Wait until process ``pid`` uses less than :data:`IDLE_CORE_FRACTION` of a core; the last share."""
    deadline = time.monotonic() + timeout
    while True:
        before = _cpu_seconds(pid)
        time.sleep(IDLE_WINDOW_SECONDS)
        share = (_cpu_seconds(pid) - before) / IDLE_WINDOW_SECONDS
        if share < IDLE_CORE_FRACTION or time.monotonic() > deadline:
            return share


@dataclass(frozen=True)
class Comparison:
    """One figure predicted and measured."""

    figure: str
    unit: str
    #: None where the model predicts that the server does not serve it
    predicted: float | None
    low: float | None
    high: float | None
    measured: float | None
    #: the issue's goal for this figure: the largest relative error accepted (0: exact)
    goal: float | None
    #: what a prediction of None means for this figure
    unpredicted: str = "not served"

    @property
    def error(self) -> float | None:
        """(predicted - measured) / measured."""
        measured = self.measured
        if not measured or self.predicted is None:
            return None
        return (self.predicted - measured) / measured

    @property
    def met(self) -> bool | None:
        if self.goal is None or self.error is None:
            return None
        return abs(self.error) <= self.goal + 1e-9


def compare(predicted: Estimate, before: dict[str, Any], after: dict[str, Any],
            install_seconds: float | None) -> list[Comparison]:
    """Predicted against measured, figure by figure (growth from ``before`` to ``after``)."""
    mib = float(1 << 20)

    def grew(name: str) -> float | None:
        if before.get(name) is None or after.get(name) is None:
            return None
        return float(after[name] - before[name])

    rss, heap, live = grew("rss_bytes"), grew("heap_bytes"), grew("live_heap_bytes")
    p = predicted
    held = p.live_heap_bytes
    return [
        # The memory the CRDs hold is the judged figure; resident memory (what a limit counts) is
        # given with its interval: the same install's RSS moves more than the goal between runs.
        Comparison(MEMORY_HELD, "MiB", held.value / mib if held else None, held.low / mib if held else None,
                   held.high / mib if held else None, live / mib if live is not None else None, MEMORY_GOAL,
                   unpredicted="not calibrated on this minor"),
        Comparison("memory added (RSS)", "MiB", p.memory_bytes.value / mib, p.memory_bytes.low / mib,
                   p.memory_bytes.high / mib, rss / mib if rss is not None else None, None),
        Comparison("Go heap added", "MiB", p.heap_bytes.value / mib, p.heap_bytes.low / mib, p.heap_bytes.high / mib,
                   heap / mib if heap is not None else None, None),
        Comparison("aggregated discovery added", "bytes", p.aggregated_bytes_added, None, None,
                   grew("aggregated_bytes"), 0.10),
        Comparison("legacy walk requests", "requests", float(p.legacy_requests_after), None, None,
                   after.get("legacy_requests"), 0.0),
        Comparison("OpenAPI v3 paths added", "paths", float(p.openapi_v3_paths_added), None, None,
                   grew("openapi_v3_paths"), 0.0),
        Comparison("OpenAPI v2 bytes added", "bytes", p.openapi_v2_bytes_added.value, p.openapi_v2_bytes_added.low,
                   p.openapi_v2_bytes_added.high, grew("openapi_v2_bytes"), None),
        Comparison("install time (loader defaults)", "s", p.install_seconds.value, p.install_seconds.low,
                   p.install_seconds.high, install_seconds, INSTALL_GOAL),
        Comparison("etcd connections added", "connections", p.etcd_connections_added.value, None, None,
                   grew("etcd_connections"), None),
    ]


def comparison_table(rows: list[Comparison]) -> str:
    """Predicted and measured side by side, with the error and the goal."""
    lines = [f"{'figure':32} {'predicted':>26} {'measured':>12} {'error':>8}  goal"]
    for row in rows:
        band = f" ({row.low:.4g}-{row.high:.4g})" if row.low is not None and row.high is not None else ""
        measured = f"{row.measured:.4g}" if row.measured is not None else "n/a"
        error = f"{row.error:+.1%}" if row.error is not None else "n/a"
        goal = ("exact" if row.goal == 0 else f"within {row.goal:.0%}") if row.goal is not None else "-"
        verdict = {True: " met", False: " MISSED", None: ""}[row.met]
        predicted = f"{row.predicted:.4g}{band}" if row.predicted is not None else row.unpredicted
        lines.append(f"{row.figure:32} {predicted:>26} {measured:>12} {error:>8}  {goal}{verdict}"
                     f"  [{row.unit}]")
    return "\n".join(lines)


def comparison_json(rows: list[Comparison]) -> list[dict[str, Any]]:
    """The comparison as JSON rows."""
    return [{"figure": r.figure, "unit": r.unit, "predicted": r.predicted, "low": r.low, "high": r.high,
             "measured": r.measured, "error": r.error, "goal": r.goal, "met": r.met} for r in rows]
