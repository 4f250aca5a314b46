"""Probes that ``crdscope probe <name>`` can run once, by name.

Each entry names an ``async def once(cluster, **options) -> Sample`` lazily
(importing a probe module is deferred until it is asked for, so the CLI
starts fast).
"""

from __future__ import annotations

import importlib
from typing import Any
from collections.abc import Awaitable, Callable

from .cluster import Cluster
from .errors import ConfigError
from .samples import Sample

ONESHOTS: dict[str, str] = {
    "version": "crdscope.probes.version:probe_version",
    "discovery": "crdscope.probes.discovery:once",
    "throttling": "crdscope.probes.throttling:once",
    "inventory": "crdscope.probes.inventory:once",
    "openapi": "crdscope.probes.openapi:once",
    "health": "crdscope.probes.health:once",
    "latency": "crdscope.probes.latency:once",
}


def register(name: str, target: str) -> None:
    """Add a one-shot probe (``module:function``)."""
    ONESHOTS[name] = target


def oneshot(name: str) -> Callable[..., Awaitable[Sample]]:
    """The one-shot function of probe ``name``."""
    try:
        target = ONESHOTS[name]
    except KeyError:
        raise ConfigError(f"unknown probe '{name}' (one of: {', '.join(sorted(ONESHOTS))})") from None
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)


async def run_once(name: str, cluster: Cluster, **options: Any) -> Sample:
    """Run probe ``name`` once against ``cluster``."""
    return await oneshot(name)(cluster, **options)
