"""Helpers of the fault tests: the real CLI as a subprocess, process memory, kubectl views."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.conftest import ROOT
from tests.helpers import established

CRDSCOPE = [sys.executable, "-m", "crdscope.cli.main"]
OWNED = "app.kubernetes.io/managed-by=crdscope"


def crdscope(*args: str, timeout: float = 300, env: dict | None = None,
             input: str | None = None) -> subprocess.CompletedProcess:
    """Run the crdscope command line as a person would (the test's XDG/KUBECONFIG environment)."""
    return subprocess.run([*CRDSCOPE, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          input=input, env={**os.environ, **(env or {})})


def spawn(*args: str, env: dict | None = None, **kwargs) -> subprocess.Popen:
    """Start the crdscope command line in the background (stdout/stderr piped to files or PIPE)."""
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([*CRDSCOPE, *args], cwd=ROOT, text=True, env={**os.environ, **(env or {})}, **kwargs)


def rss_bytes(pid: int) -> int | None:
    """Resident memory of a process from /proc (None once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def owned_crds(lab) -> dict[str, dict]:
    """crdscope's CRDs as kubectl sees them: name -> object."""
    listing = lab.kubectl_json("get", "crd", "-l", OWNED)
    return {item["metadata"]["name"]: item for item in listing["items"]}


def journal(path: Path) -> list[dict]:
    """Every whole line of a load run's record (a torn last line is skipped, as the loader does)."""
    lines = []
    for raw in path.read_text().splitlines():
        try:
            lines.append(json.loads(raw))
        except ValueError:
            continue
    return lines


@dataclass
class Finished:
    """One request that went through a :class:`CountingTransport`."""

    method: str
    path: str
    started: float
    seconds: float
    outcome: str  # HTTP status, or the exception's class name
    retry_after: str | None = None


@dataclass
class CountingTransport(httpx.AsyncBaseTransport):
    """Counts requests in flight through a transport and remembers how each one ended."""

    inner: httpx.AsyncBaseTransport
    in_flight: int = 0
    peak: int = 0
    timeline: list[tuple[float, int]] = field(default_factory=list)
    finished: list[Finished] = field(default_factory=list)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        started = time.monotonic()
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        self.timeline.append((started, self.in_flight))
        outcome, retry_after = "?", None
        try:
            response = await self.inner.handle_async_request(request)
            outcome, retry_after = str(response.status_code), response.headers.get("Retry-After")
            return response
        except BaseException as exc:
            outcome = type(exc).__name__
            raise
        finally:
            self.in_flight -= 1
            self.finished.append(Finished(request.method, request.url.path, started, time.monotonic() - started,
                                         outcome, retry_after))

    async def aclose(self) -> None:
        await self.inner.aclose()


def count_requests(cluster) -> CountingTransport:
    """Wrap a Cluster's HTTP/2 transport in a :class:`CountingTransport` (returned)."""
    counting = CountingTransport(cluster.transport.primary)
    cluster.transport.primary = counting
    return counting


#: Probe cadences of the fault tests: outages and recoveries show within seconds.
FAST_CADENCES = {"version": 5.0, "inventory": 1.0, "discovery": 3.0, "throttling": 2.0, "openapi": 2.0,
                 "health": 1.0, "latency": 2.0}


class Watched:
    """A running :class:`probes.monitor.Monitor` (fast cadences) and what it delivered.

    ``async with Watched(cluster) as watched``: ``samples`` in delivery order, ``events`` as the
    events detector derives them, ``task`` the monitor's task (done only if it died or was stopped).
    """

    def __init__(self, cluster) -> None:
        from crdscope.probes.monitor import Monitor
        from crdscope.base.settings import Settings
        from crdscope.session.events import EventDetector

        from tests.helpers import steady_cadences

        self.monitor = Monitor(cluster, Settings().override("cadences", **steady_cadences(**FAST_CADENCES)), latest={})
        self.detector = EventDetector()
        self.samples: list = []
        self.events: list = []
        self.task = None
        self.monitor.add_sink(self._sink)

    def _sink(self, sample) -> None:
        self.samples.append(sample)
        self.events.extend(self.detector.observe(sample))

    def of(self, probe: str, since: int = 0) -> list:
        """Samples of one probe, from index ``since`` of :attr:`samples` on."""
        return [s for s in self.samples[since:] if s.probe == probe]

    async def __aenter__(self) -> Watched:
        self.task = asyncio.create_task(self.monitor.run(), name="monitor")
        return self

    async def __aexit__(self, *exc) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


def assert_loaded_once(lab, final, names: list[str], runs: Path) -> None:
    """The load ended ``done`` with every CRD of ``names`` Established and nothing else: kubectl
    lists exactly them, Established; the run's journal applied each once and Established each once."""
    assert final.state == "done" and final.error is None, final
    assert (final.requested, final.established, final.failed, final.skipped) == (len(names), len(names), 0, 0), final
    seen = owned_crds(lab)
    assert sorted(seen) == sorted(names)
    assert all(established(item) for item in seen.values())
    [path] = runs.glob("*.jsonl")
    lines = journal(path)
    outcomes = collections.Counter((line["name"], line["outcome"]) for line in lines if "name" in line)
    assert {name for name, _ in outcomes} == set(names)
    for name in names:
        assert outcomes[(name, "created")] + outcomes[(name, "updated")] == 1, (name, outcomes)
        assert outcomes[(name, "established")] == 1, (name, outcomes)
    assert not [key for key in outcomes if key[1] in ("failed", "skipped")]
    assert [line["end"] for line in lines if "end" in line] == ["done"]
