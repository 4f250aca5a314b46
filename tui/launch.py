"""Open the monitor (kept apart from cli.py so that textual loads only when needed)."""

from __future__ import annotations

import click


def open_monitor(kubeconfig: str | None = None, context: str | None = None, *, record=True,
                 prometheus_url: str | None = None, theme: str | None = None) -> None:
    """Open the monitor on a cluster (the TUI arrives with its issue; until then, one probe)."""
    from probes.cluster import Cluster
    from probes.version import probe_version
    import asyncio

    async def main():
        async with Cluster.connect(kubeconfig, context) as cluster:
            return await probe_version(cluster)

    sample = asyncio.run(main())
    click.echo(f"{sample.server}: {sample.git_version or sample.error} ({sample.seconds * 1000:.1f} ms)")


def open_lab_monitor() -> None:
    """Start the lab if it is not up, then open the monitor on it."""
    from lab.binaries import ensure_binaries
    from lab.controlplane import Lab

    lab = Lab()
    state = lab.state()
    if state is None or not lab.status()["ready"]:
        binaries = ensure_binaries(progress=lambda line: click.echo(line, err=True))
        state = lab.up(binaries, say=lambda line: click.echo(line, err=True))
    open_monitor(kubeconfig=state.kubeconfig, context=None)
