"""Benchmark: the published CRD-scaling figures, Kubernetes version by Kubernetes version.

``python -m bench versions [--kubernetes 1.26,1.37] [--memory-limit SIZE] [--limit N]``: for each
built version, a fresh lab; the AWS set (``../shared/crds/provider-aws.tar.xz``) loaded with
``crdscope load`` at its default pace, while a sampler records every few seconds:

- resident memory and Go heap (``/metrics``) against the CRDs stored
  (a one-item LIST of CRDs), fitted to MiB per CRD; the API server's TCP connections to
  etcd (from /proc, lab/sockets.py) against the CRDs;
- a latency canary (``GET /api/v1/namespaces/default`` every second): p99, failures, and outage
  windows (consecutive failures); the lab supervisor's kills and restarts with ``--memory-limit``;
- the ``/openapi/v3`` index every 2 s: when each group-version's hash changed, giving each CRD's
  publication lag (first change at or after its creation; 2 s resolution).

After the load: ``crdscope probe discovery --legacy --json`` (requests, bytes, seconds and the
client models), whether aggregated discovery is served, and the first ``/openapi/v2`` (seconds,
bytes).  With ``--memory-limit`` the load runs against a capped, supervised API server and the
run stops after ``--capped-minutes``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import statistics
import subprocess
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from crdscope.lab.binaries import ensure_binaries, supported_minors
from crdscope.lab.cgroups import parse_size
from crdscope.lab.controlplane import Lab, LabOptions, LabState, admin_tls
from crdscope.lab.sockets import etcd_connection_counter
from crdscope.connection.cluster import status_message
from crdscope.lab.supervisor import read_events

from crdscope.base.paths import cache_dir

from .common import SHARED_CRDS, BenchError, Options, Result, isolate_environment, say
from .heapprofile import PROFILES_DIR
from .discovery import crdscope_command
from .labs import crd_files

SET = "provider-aws"
CRD_LIST = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
METRIC_SECONDS = 5.0
CANARY_SECONDS = 1.0
OPENAPI_SECONDS = 2.0
PUBLISHED = {
    "discovery_192gv_5_100_s": 20.3, "discovery_192gv_50_300_s": 9.6,
    "discovery_368gv_5_100_s": 50.0, "discovery_368gv_50_300_s": 29.8,
    "mib_per_crd_780": 3.3, "rss_gib_1900_crds": "5.5-6.5",
    "etcd_connections_1878_crds": 1937, "openapi_slow_for": "up to an hour",
}


def _metric(text: str, name: str, labels: str = "") -> float | None:
    pattern = rf"^{re.escape(name)}(?:\{{[^}}]*{re.escape(labels)}[^}}]*\}})?\s+(\S+)$"
    match = re.search(pattern, text, re.M)
    return float(match.group(1)) if match else None


def _crd_count(client: httpx.Client) -> float | None:
    """CRDs stored now: one item listed, the rest counted by ``remainingItemCount``."""
    try:
        answer = client.get(CRD_LIST, params={"limit": "1"})
        if answer.status_code != 200:
            return None
        listed = answer.json()
    except (httpx.HTTPError, ValueError):
        return None
    return float(len(listed.get("items") or []) + int((listed.get("metadata") or {}).get("remainingItemCount") or 0))


def _fit(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of y over x (None with fewer than 3 distinct x)."""
    if len({x for x, _ in points}) < 3:
        return None
    return statistics.linear_regression([x for x, _ in points], [y for _, y in points]).slope


def unpack_whole_set(set_name: str = SET) -> Path:
    """The whole archive unpacked once into the cache :func:`labs.crd_dir` reads, in one streaming pass.

    ``crd_dir`` seeks member by member, which re-reads an .xz archive from its start each
    time: minutes for 2,000 files on a busy machine; streaming is one pass.
    """
    target = cache_dir() / "bench-crds" / f"{set_name}-all"
    if (target / ".complete").exists():
        return target
    archive = SHARED_CRDS / f"{set_name}.tar.xz"
    if not archive.exists():
        raise BenchError(f"{archive} is absent (real CRD sets live beside the checkout)")
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "r|xz") as tar:
        for member in tar:
            extracted = tar.extractfile(member) if member.isfile() and member.name.endswith(".yaml") else None
            if extracted is not None:
                (target / Path(member.name).name).write_bytes(extracted.read())
    (target / ".complete").write_text("")
    return target


def first_crds(size: int, set_name: str = SET) -> Path:
    """The first ``size`` files (sorted) of the set, linked from the whole set's unpacked folder."""
    target = cache_dir() / "bench-crds" / f"{set_name}-first-{size}"
    if not (target / ".complete").exists():
        target.mkdir(parents=True, exist_ok=True)
        for path in crd_files(unpack_whole_set(set_name))[:size]:
            if not (target / path.name).exists():
                os.link(path, target / path.name)
        (target / ".complete").write_text("")
    return target


def _percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


@dataclass
class Sampler:
    """Background threads measuring one lab while it is loaded."""

    state: LabState
    home: Path
    stop: threading.Event = field(default_factory=threading.Event)
    memory: list[dict[str, float]] = field(default_factory=list)
    canary: list[tuple[float, float | None]] = field(default_factory=list)
    v3_changes: dict[str, list[float]] = field(default_factory=dict)
    threads: list[threading.Thread] = field(default_factory=list)
    #: ``--heap-profiles``: where to keep the server's heap profile once ``halfway`` CRDs are stored
    profiles: Path | None = None
    halfway: int = 0
    profiled_at: float | None = None

    def client(self, timeout: float = 10) -> httpx.Client:
        return httpx.Client(base_url=self.state.server, verify=admin_tls(self.state.pki_dir), timeout=timeout)

    def start(self) -> None:
        for target in (self._metrics, self._canary, self._openapi):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self.threads.append(thread)

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)

    def _metrics(self) -> None:
        connections = etcd_connection_counter(self.state.server, self.home)
        with self.client(30) as client:
            while not self.stop.wait(METRIC_SECONDS):
                try:
                    text = client.get("/metrics").text
                except httpx.HTTPError:
                    continue
                # The CRDs stored, counted by a one-item LIST: the object-count metrics
                # (apiserver_resource_objects on 1.37, apiserver_storage_objects before) refresh
                # about once a minute on older servers, too seldom to fit a short load.
                crds = _crd_count(client)
                rss = _metric(text, "process_resident_memory_bytes")
                if crds is None or rss is None:
                    continue
                heap = _metric(text, "go_memstats_heap_inuse_bytes") or 0.0
                etcd = connections() if connections else None
                self.memory.append({"at": time.time(), "crds": crds, "rss": rss, "heap": heap,
                                    "etcd": float(etcd) if etcd is not None else -1.0})
                if self.profiles is not None and self.profiled_at is None and crds >= self.halfway > 0:
                    self._profile(client, crds)

    def _profile(self, client: httpx.Client, crds: float) -> None:
        """The heap profile in the middle of the install (its forced collection is one GC more)."""
        from .heapprofile import save

        assert self.profiles is not None
        try:
            save(client, self.profiles / "half.pb.gz")
        except (httpx.HTTPError, BenchError) as exc:
            say(f"no heap profile halfway: {exc}")
            return
        self.profiled_at = crds
        say(f"heap profile at {crds:.0f} CRDs")

    def _canary(self) -> None:
        with self.client(10) as client:
            while not self.stop.wait(CANARY_SECONDS):
                started = time.perf_counter()
                try:
                    ok = client.get("/api/v1/namespaces/default").status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.canary.append((time.time(), time.perf_counter() - started if ok else None))

    def _openapi(self) -> None:
        seen: dict[str, str] = {}
        with self.client(30) as client:
            while not self.stop.wait(OPENAPI_SECONDS):
                try:
                    paths = client.get("/openapi/v3").json().get("paths") or {}
                except (httpx.HTTPError, ValueError):
                    continue
                now = time.time()
                for path, entry in paths.items():
                    url = entry.get("serverRelativeURL", "") if isinstance(entry, dict) else ""
                    if seen.get(path) != url:
                        seen[path] = url
                        self.v3_changes.setdefault(path, []).append(now)

    def outages(self) -> list[float]:
        """Lengths of the windows in which every canary request failed (seconds)."""
        windows, began = [], None
        for at, latency in self.canary:
            if latency is None and began is None:
                began = at
            elif latency is not None and began is not None:
                windows.append(round(at - began, 1))
                began = None
        if began is not None:
            windows.append(round(self.canary[-1][0] - began, 1))
        return windows


def _crd_creations(state: LabState) -> list[tuple[str, list[str], float]]:
    """(group, served versions, creation time) of every CRD, read in pages."""
    from crdscope.connection.credentials import parse_rfc3339

    found, token = [], ""
    with httpx.Client(base_url=state.server, verify=admin_tls(state.pki_dir), timeout=300) as client:
        while True:
            page = client.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                              params={"limit": "200", **({"continue": token} if token else {})}).json()
            for item in page.get("items", []):
                spec = item.get("spec") or {}
                versions = [v["name"] for v in spec.get("versions") or [] if v.get("served")]
                found.append((spec.get("group", ""), versions, parse_rfc3339(item["metadata"]["creationTimestamp"])))
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                return found


def _v3_lags(state: LabState, changes: dict[str, list[float]]) -> list[float]:
    lags = []
    for group, versions, created in _crd_creations(state):
        for version in versions:
            after = [t for t in changes.get(f"apis/{group}/{version}", []) if t >= created]
            if after:
                lags.append(after[0] - created)
    return lags


def _probe_json(state: LabState, *args: str) -> dict[str, Any]:
    done = subprocess.run([*crdscope_command(), "probe", *args, "--json", "--kubeconfig", state.kubeconfig,
                           "--context", state.admin_context], capture_output=True, text=True, timeout=1800)
    try:
        return json.loads(done.stdout)
    except ValueError:
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1]}


def _after_load(state: LabState, figures: dict[str, Any]) -> None:
    walk = _probe_json(state, "discovery", "--legacy")
    figures["discovery_requests"] = walk.get("requests")
    figures["discovery_bytes"] = walk.get("bytes")
    figures["discovery_seconds"] = walk.get("seconds")
    figures["group_versions"] = walk.get("group_versions")
    figures["client_models_s"] = {m["name"]: round(m["seconds"], 1) for m in walk.get("client_models") or []}
    aggregated = _probe_json(state, "discovery")
    figures["aggregated_discovery"] = aggregated.get("mode") == "aggregated"
    if figures["aggregated_discovery"]:
        figures["aggregated_discovery_bytes"] = aggregated.get("bytes")
        figures["aggregated_discovery_format"] = aggregated.get("format")
    figures["discovery_fallback_reason"] = aggregated.get("fallback_reason")
    with httpx.Client(base_url=state.server, verify=admin_tls(state.pki_dir), timeout=1800) as client:
        started = time.perf_counter()
        try:
            response = client.get("/openapi/v2", headers={"Accept": "application/json"})
            figures["openapi_v2_first_s"] = round(time.perf_counter() - started, 1)
            figures["openapi_v2_status"] = response.status_code
            if response.status_code == 200:
                figures["openapi_v2_mib"] = round(len(response.content) / 2**20, 1)
            else:
                # An error answer is not the document (a server that cannot build /openapi/v2 within
                # its request timeout answers 504): say what it was, never a size.
                figures["openapi_v2_mib"] = f"{response.status_code}: {status_message(response)}"
        except httpx.HTTPError as exc:
            figures["openapi_v2_first_s"] = f"failed: {exc}"


def _summarise(sampler: Sampler, state: LabState, figures: dict[str, Any]) -> None:
    idle = [m for m in sampler.memory if m["crds"] == 0]
    if idle:  # before the first CRD: what the version costs with nothing installed
        figures["rss_idle_mib"] = round(idle[-1]["rss"] / 2**20)
    points = [m for m in sampler.memory if m["crds"] > 0]
    if points:
        figures["crds_stored"] = int(max(m["crds"] for m in points))
        figures["rss_end_mib"] = round(points[-1]["rss"] / 2**20)
        rss, heap = _fit([(m["crds"], m["rss"]) for m in points]), _fit([(m["crds"], m["heap"]) for m in points])
        figures["rss_mib_per_crd"] = round(rss / 2**20, 2) if rss else None
        figures["heap_mib_per_crd"] = round(heap / 2**20, 2) if heap else None
        etcd = [(m["crds"], m["etcd"]) for m in points if m["etcd"] >= 0]
        slope = _fit(etcd)
        figures["etcd_connections_per_crd"] = round(slope, 2) if slope is not None else None
        figures["etcd_connections_end"] = int(etcd[-1][1]) if etcd else None
    latencies = [latency for _, latency in sampler.canary if latency is not None]
    p99 = _percentile(latencies, 0.99)
    figures["canary_p99_ms"] = round(p99 * 1000) if p99 is not None else None
    figures["canary_failures"] = sum(1 for _, latency in sampler.canary if latency is None)
    figures["outages_s"] = sampler.outages()
    try:
        lags = _v3_lags(state, sampler.v3_changes)
    except httpx.HTTPError as exc:  # a capped server may be down (crash-looping) at the end
        lags = []
        figures["openapi_v3_lag_unobservable"] = f"CRD list failed at the end: {exc}"
    p95 = _percentile(lags, 0.95)
    p50 = _percentile(lags, 0.50)
    figures["openapi_v3_lag_p50_s"] = round(p50, 1) if p50 is not None else None
    figures["openapi_v3_lag_p95_s"] = round(p95, 1) if p95 is not None else None
    figures["openapi_v3_lag_max_s"] = round(max(lags), 1) if lags else None
    events = read_events(state.events_log) if state.events_log else []
    figures["supervisor_events"] = [{k: e.get(k) for k in ("at", "event", "oom_killed", "ran_seconds",
                                                            "backoff_seconds", "outage_seconds")} for e in events]
    deaths = [e for e in events if e.get("event") == "died"]
    figures["restarts"] = sum(1 for e in events if e.get("event") == "restarted")
    figures["oom_kills"] = sum(1 for e in deaths if e.get("oom_killed"))
    if deaths:
        first = deaths[0]["at"]
        before = [m["crds"] for m in sampler.memory if m["at"] <= first]
        figures["crds_at_first_kill"] = int(before[-1]) if before else None
        figures["restart_outages_s"] = [e["outage_seconds"] for e in events if e.get("event") == "restarted"]


def _held(state: LabState, figures: dict[str, Any], profiles: Path | None, name: str) -> None:
    """Memory held (heap in use after a forced collection, ``costmodel.measure``) into ``figures``, and the
    heap profile kept as ``profiles/name.pb.gz`` (``--heap-profiles``); read once the server is idle."""
    from crdscope.costmodel.measure import MEMORY_GAUGES
    from crdscope.connection.metrics import parse_text

    from .heapprofile import save
    from .labs import wait_until_idle

    wait_until_idle(state)
    with httpx.Client(base_url=state.server, verify=admin_tls(state.pki_dir), timeout=300) as client:
        if profiles is not None:
            save(client, profiles / f"{name}.pb.gz")
        else:
            client.get("/debug/pprof/heap", params={"gc": "1"})
        held = parse_text(client.get("/metrics").content, MEMORY_GAUGES).value("go_memstats_heap_inuse_bytes")
    figures[f"held_{name}_mib"] = round(held / 2**20) if held else None


def measure(minor: str, directory: Path, *, memory_limit: int = 0, capped_minutes: float = 20.0,
            limit: int | None = None, profiles: Path | None = None) -> dict[str, Any]:
    """Load the set into a fresh lab of ``minor`` and return its figures (``profiles``: keep the server's
    heap profile before the load, halfway through it and once idle after it)."""
    binaries = ensure_binaries(kubernetes=minor, progress=say)
    with tempfile.TemporaryDirectory(prefix="crdscope-bench-versions-") as home:
        lab = Lab(Path(home))
        state = lab.up(binaries, say=say, options=LabOptions(memory_limit=memory_limit))
        figures: dict[str, Any] = {"kubernetes": state.kubernetes_version, "memory_limit_mib": memory_limit >> 20}
        sampler = Sampler(state, Path(home), profiles=profiles, halfway=len(crd_files(directory)) // 2)
        try:
            if not memory_limit:
                _held(state, figures, profiles, "before")
            time.sleep(METRIC_SECONDS * 2)  # a baseline before the first CRD (the sampler's first points)
            sampler.start()
            time.sleep(METRIC_SECONDS * 2)
            argv = [*crdscope_command(), "load", str(directory), "--json", "--new-run", "--kubeconfig",
                    state.kubeconfig, "--context", state.admin_context, *(["--limit", str(limit)] if limit else [])]
            started = time.monotonic()
            timeout = capped_minutes * 60 if memory_limit else 3 * 3600
            try:
                done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
                figures["load_exit"] = done.returncode
                figures["load"] = json.loads(done.stdout) if done.stdout.strip().startswith("{") else None
            except subprocess.TimeoutExpired:
                figures["load_exit"] = f"stopped after {capped_minutes:.0f} min"
            figures["load_seconds"] = round(time.monotonic() - started)
            sampler.finish()
            _summarise(sampler, lab.require(), figures)
            figures["profiled_halfway_at_crds"] = sampler.profiled_at
            if not memory_limit:
                _held(state, figures, profiles, "end")
                _after_load(state, figures)
        finally:
            sampler.finish()
            lab.down()
    return figures


def run(options: Options, minors: list[str] | None = None, memory_limit: int = 0,
        limit: int | None = None, capped_minutes: float = 20.0, profiles: bool = False) -> list[Result]:
    """Every chosen version (default: each one built), one Result each."""
    from crdscope.lab.binaries import cached_binaries, versions_for

    minors = minors or [m for m in supported_minors() if cached_binaries(versions_for(m))]
    if not minors:
        raise BenchError("no Kubernetes version is built (crdscope lab build --kubernetes 1.26)")
    directory = first_crds(limit) if limit else unpack_whole_set()
    results = []
    for minor in minors:
        say(f"versions: Kubernetes {minor}, {len(crd_files(directory))} CRDs of {SET}"
            + (f", memory limit {memory_limit >> 20} MiB" if memory_limit else ""))
        kept = (PROFILES_DIR / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-versions-{minor}"
                if profiles else None)
        load_before = os.getloadavg()
        figures = measure(minor, directory, memory_limit=memory_limit, capped_minutes=capped_minutes, limit=limit,
                          profiles=kept)
        figures["heap_profiles"] = str(kept.relative_to(PROFILES_DIR.parent.parent)) if kept else None
        figures["load_average_before"], figures["load_average_after"] = load_before, os.getloadavg()
        figures["published"] = PUBLISHED
        result = Result(name="versions" + ("-capped" if memory_limit else ""), kubernetes=figures["kubernetes"],
                        sizes=f"{SET}:{limit or 'all'}", figures=figures)
        results.append(result)
        say(json.dumps(figures, default=str))
    return results


#: (row label, figure key, published figure beside it) of the RESULTS.md table.
TABLE_ROWS = (
    ("CRDs stored at the end", "crds_stored", "780 / ~1,900"),
    ("RSS per CRD, fitted over the load (MiB)", "rss_mib_per_crd", "~3.3 (780 CRDs, 0.6 -> 3.2 GB); docs ~3-4"),
    ("Go heap in use per CRD (MiB)", "heap_mib_per_crd", "-"),
    ("RSS at the end (MiB)", "rss_end_mib", "5.5-6.5 GiB at ~1,900 CRDs"),
    ("etcd connections per CRD", "etcd_connections_per_crd", "~1.03 (1,878 CRDs: 1,937)"),
    ("etcd connections at the end", "etcd_connections_end", "1,937"),
    ("aggregated discovery served", "aggregated_discovery", "1.26 no (alpha), 1.27+ yes"),
    ("group-versions", "group_versions", "192 / 368"),
    ("legacy walk: requests", "discovery_requests", "2 + group-versions"),
    ("legacy walk: bytes", "discovery_bytes", "-"),
    ("legacy walk: seconds (unthrottled)", "discovery_seconds", "9.8 s / 17.8 s (no limiter)"),
    ("client models (seconds)", "client_models_s", "5/100: 20.3 s / 50 s; 50/300: 9.6 s / 29.8 s"),
    ("first /openapi/v2 after the load (s)", "openapi_v2_first_s", "-"),
    ("/openapi/v2 size (MiB)", "openapi_v2_mib", "-"),
    ("OpenAPI v3 publication lag p95 / max (s)", ("openapi_v3_lag_p95_s", "openapi_v3_lag_max_s"),
     "slow for up to an hour"),
    ("canary GET p99 during the load (ms)", "canary_p99_ms", "SLO 1,000"),
    ("canary failures / outages (s)", ("canary_failures", "outages_s"), "-"),
    ("load seconds (crdscope load, default pace)", "load_seconds", "~50 CRDs / 30 s sustainable (GKE)"),
)


def table(documents: list[dict[str, Any]]) -> str:
    """The markdown table of RESULTS.md from result documents (one column per run)."""
    def cell(figures: dict[str, Any], key: str | tuple[str, ...]) -> str:
        keys = key if isinstance(key, tuple) else (key,)
        values = [figures.get(k) for k in keys]
        return " / ".join("-" if v is None else (json.dumps(v) if isinstance(v, (dict, list)) else str(v))
                          for v in values)

    def head(document: dict[str, Any]) -> str:
        cap = document["figures"].get("memory_limit_mib")
        return f"{document['kubernetes']} ({document['sizes']}{f', cap {cap} MiB' if cap else ''})"

    heads = [head(d) for d in documents]
    lines = ["| figure | " + " | ".join(heads) + " | published |", "|---" * (len(heads) + 2) + "|"]
    for label, key, published in TABLE_ROWS:
        lines.append(f"| {label} | " + " | ".join(cell(d["figures"], key) for d in documents) + f" | {published} |")
    return "\n".join(lines)


#: (column, figure keys) of the per-minor table: one row per minor, the issue's columns.
MINOR_COLUMNS = (
    ("minor", ("kubernetes",)),
    ("CRDs: Established / last sampled", ("crds_established", "crds_stored")),
    ("RSS MiB/CRD", ("rss_mib_per_crd",)),
    ("idle RSS MiB", ("rss_idle_mib",)),
    ("RSS at the end MiB", ("rss_end_mib",)),
    ("memory held added MiB", ("held_added_mib",)),
    ("aggregated discovery (bytes)", ("aggregated_discovery_format", "aggregated_discovery_bytes")),
    ("legacy walk: requests / bytes", ("discovery_requests", "discovery_bytes")),
    ("OpenAPI v3 lag p50 / p95 s", ("openapi_v3_lag_p50_s", "openapi_v3_lag_p95_s")),
    ("install s", ("load_seconds",)),
    ("etcd connections / per CRD", ("etcd_connections_end", "etcd_connections_per_crd")),
)
#: A change of MiB per CRD or v3 lag p95 of this fraction from one minor to the next is a step.
STEP_FRACTION = 0.25


def _minor_of(document: dict[str, Any]) -> tuple[int, int]:
    from crdscope.lab.binaries import minor_key, minor_of

    return minor_key(minor_of(document["kubernetes"]))  # type: ignore[return-value]


def minor_rows(documents: list[dict[str, Any]]) -> str:
    """The per-minor table of RESULTS.md: one row per run, oldest minor first."""
    ordered = sorted(documents, key=_minor_of)
    lines = ["| " + " | ".join(label for label, _ in MINOR_COLUMNS) + " |", "|---" * len(MINOR_COLUMNS) + "|"]
    for document in ordered:
        figures = {**document["figures"], "kubernetes": document["kubernetes"]}
        load = figures.get("load")
        # The sampler's last point can come before the load's last CRDs: the load says how many.
        figures["crds_established"] = load.get("established") if isinstance(load, dict) else None
        if not figures.get("aggregated_discovery"):
            figures["aggregated_discovery_format"] = "not served"
        if figures.get("held_end_mib") is not None and figures.get("held_before_mib") is not None:
            figures["held_added_mib"] = figures["held_end_mib"] - figures["held_before_mib"]
        cells = [" / ".join("-" if figures.get(k) is None else str(figures[k]) for k in keys)
                 for _, keys in MINOR_COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def steps(documents: list[dict[str, Any]], key: str, fraction: float = STEP_FRACTION) -> list[str]:
    """Where ``key`` changed by more than ``fraction`` from one measured minor to the next."""
    ordered = [d for d in sorted(documents, key=_minor_of) if isinstance(d["figures"].get(key), (int, float))]
    found = []
    for before, after in itertools.pairwise(ordered):
        old, new = before["figures"][key], after["figures"][key]
        if old and abs(new - old) / old > fraction:
            found.append(f"{key}: {old} on {before['kubernetes']} -> {new} on {after['kubernetes']} "
                         f"({(new - old) / old:+.0%})")
    return found


def minor_chart(documents: list[dict[str, Any]]) -> str:
    """An SVG of memory per CRD and OpenAPI v3 lag p95 against the minor (x: the minor number)."""
    from crdscope.session.svgplot import Series, chart

    ordered = sorted(documents, key=_minor_of)

    def points(key: str) -> list[tuple[float, float]]:
        return [(float(_minor_of(d)[1]), float(d["figures"][key])) for d in ordered
                if isinstance(d["figures"].get(key), (int, float))]

    memory = chart("kube-apiserver RSS per CRD (provider-aws) by Kubernetes minor (1.x)",
                   [Series("MiB per CRD", points("rss_mib_per_crd"))], x_label="minor (1.x)", y_label="MiB/CRD")
    lag = chart("OpenAPI v3 publication lag p95 by Kubernetes minor (1.x)",
                [Series("v3 lag p95 (s)", points("openapi_v3_lag_p95_s"))], x_label="minor (1.x)", y_label="s")
    return stack_charts([memory, lag])


def stack_charts(charts: list[str], height: int = 260, width: int = 720) -> str:
    """One standalone SVG file of ``charts`` (svgplot's, styled by the report's sheet) one under another."""
    from crdscope.session.report_render import SVG_STYLE

    placed = [chart.replace('<svg class="chart" ', f'<svg class="chart" x="0" y="{index * height}" '
                            f'width="{width}" height="{height}" ', 1) for index, chart in enumerate(charts)]
    sheet = SVG_STYLE.strip()
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height * len(charts)}" '
            f'viewBox="0 0 {width} {height * len(charts)}">\n<style>\n{sheet}\n</style>\n'
            f'<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(placed) + "\n</svg>\n")


def main(argv: list[str] | None = None) -> int:
    """``python -m bench versions [--kubernetes LIST] [--memory-limit SIZE] [--limit N]``."""
    parser = argparse.ArgumentParser(prog="python -m bench versions", description=__doc__)
    parser.add_argument("--kubernetes", default="",
                        help="comma-separated minors, or 'all' (every supported one, built first when not yet) "
                             "(default: every built one)")
    parser.add_argument("--memory-limit", default="", help="cap the API server (e.g. 2Gi) and count kills")
    parser.add_argument("--capped-minutes", type=float, default=20.0, help="stop a capped run after this long")
    parser.add_argument("--limit", type=int, default=None, help="load only the first N CRDs of the set")
    parser.add_argument("--output", type=Path, default=None, help="directory of the JSON results")
    parser.add_argument("--table", nargs="+", type=Path, metavar="JSON", help="print the RESULTS.md table of results")
    parser.add_argument("--minor-table", nargs="+", type=Path, metavar="JSON",
                        help="print the per-minor table (a row per minor) and the step changes of results")
    parser.add_argument("--heap-profiles", action="store_true",
                        help="keep the API server's heap profile before the load, halfway and once idle after it "
                             "(bench/results/profiles/<stamp>-versions-<minor>/)")
    parser.add_argument("--chart", type=Path, default=None, metavar="SVG",
                        help="write the chart (MiB per CRD, v3 lag against the minor) of --minor-table's results or of "
                             "this run's (e.g. docs/versions.svg)")
    args = parser.parse_args(argv)
    if args.table:
        print(table([json.loads(path.read_text()) for path in args.table]))
        return 0
    if args.minor_table:
        documents = [json.loads(path.read_text()) for path in args.minor_table]
        print(minor_rows(documents))
        for line in steps(documents, "rss_mib_per_crd") + steps(documents, "openapi_v3_lag_p95_s"):
            print(f"step: {line}")
        if args.chart:
            args.chart.write_text(minor_chart(documents))
        return 0
    options = Options(append_results_md=False)
    isolate_environment()
    if args.output:
        options.output = args.output
    minors = ([*supported_minors()] if args.kubernetes == "all"
              else [m.strip() for m in args.kubernetes.split(",") if m.strip()] or None)
    limit = parse_size(args.memory_limit) if args.memory_limit else 0
    written = []
    for result in run(options, minors, limit, args.limit, args.capped_minutes, args.heap_profiles):
        written.append(result.write(options))
        print(json.dumps({"benchmark": result.name, "result": str(written[-1])}), flush=True)
    if len(written) > 1:  # a row per minor, its step changes, and (--chart) the chart: one command for all
        return main(["--minor-table", *map(str, written), *(["--chart", str(args.chart)] if args.chart else [])])
    return 0
