"""Run a real Monitor against a lab inside an async test and collect what its probes deliver.

Shared by the health and latency end-to-end tests.  kubectl runs in a thread
(``kubectl``) so that the monitor keeps running on the event loop meanwhile.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import contextlib
from pathlib import Path
from collections.abc import Callable

import pytest

from tests.crdsets import crd_names, delete_crds
from tests.helpers import async_wait_for

ADMIN_CONTEXT = "crdscope-lab"


class Collected:
    """A sink keeping every sample, by probe name."""

    def __init__(self) -> None:
        self.samples: dict[str, list] = {}

    def __call__(self, sample) -> None:
        self.samples.setdefault(sample.probe, []).append(sample)

    def of(self, probe: str) -> list:
        return self.samples.get(probe, [])

    async def next(self, probe: str, predicate: Callable = lambda s: True, *, timeout: float = 60.0,
                   message: str = "a sample"):
        """The first sample of ``probe`` delivered from now on that satisfies ``predicate``."""
        start = len(self.of(probe))

        def found():
            return next((s for s in self.of(probe)[start:] if predicate(s)), None)

        return await async_wait_for(found, timeout=timeout, message=f"{probe}: {message}")


@contextlib.asynccontextmanager
async def running_monitor(lab, probes: list[str], *, kubeconfig: str | None = None,
                          context: str | None = None, count_etcd: bool = True, **cadences: float):
    """A Monitor on the lab running in the background; yields (monitor, collected)."""
    from crdscope.base.facts import ClusterFacts, LabHooks
    from crdscope.lab.sockets import etcd_connection_counter
    from crdscope.connection.cluster import Cluster
    from crdscope.probes.monitor import Monitor
    from crdscope.base.settings import Settings

    cluster = Cluster.connect(kubeconfig or lab.kubeconfig, context or (None if kubeconfig else ADMIN_CONTEXT))
    from tests.helpers import steady_cadences

    facts = ClusterFacts()
    if count_etcd:
        # What the TUI/headless wiring does when the server is the lab's (session.live.lab_hooks).
        counter = etcd_connection_counter(lab.server, Path(lab.lab.home))
        assert counter is not None, "the lab was not recognised from its state file"
        facts = ClusterFacts(lab=LabHooks(etcd_connections=counter))
    monitor = Monitor(cluster, Settings().override("cadences", **steady_cadences(**cadences)), probes=probes,
                      latest={}, facts=facts)
    collected = Collected()
    monitor.add_sink(collected)
    task = asyncio.create_task(monitor.run())
    try:
        yield monitor, collected
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        await cluster.aclose()


async def kubectl(lab, *args: str, check: bool = True, **kwargs):
    """The real kubectl, off the event loop."""
    return await asyncio.to_thread(lab.kubectl, *args, check=check, **kwargs)


async def apply_and_establish(lab, path: Path, monitor=None) -> None:
    """kubectl apply, then wait until every CRD of the file is Established.

    With a running monitor its CRD watch tells (kubectl wait asks each CRD in turn: slow).
    """
    from tests.crdsets import crd_names

    await kubectl(lab, "apply", "-f", str(path))
    if monitor is None:
        await kubectl(lab, "wait", "--for=condition=Established", "--timeout=120s", "-f", str(path))
        return
    names = set(crd_names([path]))
    established = await monitor.crds.wait_until(
        lambda crds: all(name in crds and crds[name].established is not None for name in names), timeout=120)
    assert established, f"CRDs of {path.name} not Established within 120 s"


async def delete_and_wait(lab, *paths: Path) -> None:
    """Delete the CRDs of some files and wait until they are gone (tests share one lab)."""
    await asyncio.to_thread(delete_crds, lab, *crd_names(list(paths)))


def metric_value(text: str, name: str) -> float:
    """One unlabelled sample of a /metrics text read by kubectl (the reference reader)."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def ss_etcd_connections(lab) -> int:
    """The reference count: `ss` lists the API server's established connections to etcd's port."""
    if not shutil.which("ss"):
        pytest.fail("ss (iproute2) is needed as the reference for the etcd connection count")
    state = lab.lab.state()
    pid, port = state.components["apiserver"].pid, state.components["etcd"].port
    done = subprocess.run(["ss", "-Htnp", "state", "established", f"( dport = :{port} )"],
                          capture_output=True, text=True, timeout=30, check=True)
    return sum(1 for line in done.stdout.splitlines() if f"pid={pid}," in line)
