"""Every kind of sample, named once: its module, its sample type, its monitor factory, its one-shot form.

The monitor builds its probes from :data:`PROBES` (in this order, which is the
order panels and reports list them in), ``crdscope probe <name>`` runs the
one-shot form, and replay and ``--fail-if`` find a probe's sample type here.
Modules are named, not imported: a probe's module is imported when it is first
asked for, so the CLI starts fast and this table depends on no probe.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from crdscope.base.errors import ConfigError
from crdscope.base.samples import SAMPLE_TYPES, Sample

if TYPE_CHECKING:
    from .probe import Probe, ProbeParts


@dataclass(frozen=True)
class ProbeKind:
    """One row of the table: where a probe lives and what it offers."""

    name: str
    module: str
    #: The :class:`Sample` subclass: ``Name`` in ``module``, or ``package.module:Name`` (the probes'
    #: own samples live in ``crdscope.base.samples.<probe>``, where every reader imports them).
    sample: str
    #: ``factory(parts) -> Probe`` in ``module``; None: the monitor does not run it.
    factory: str | None = "make_probe"
    #: ``async def f(cluster, **options) -> Sample`` in ``module``; None: no ``crdscope probe`` form.
    oneshot: str | None = "once"


#: Where the probes' samples live.
SAMPLES = "crdscope.base.samples."

PROBES: tuple[ProbeKind, ...] = (
    ProbeKind("version", "crdscope.probes.version", SAMPLES + "version:VersionSample", oneshot="probe_version"),
    ProbeKind("inventory", "crdscope.probes.inventory", SAMPLES + "inventory:InventorySample"),
    ProbeKind("discovery", "crdscope.probes.discovery", SAMPLES + "discovery:DiscoverySample"),
    ProbeKind("throttling", "crdscope.probes.throttling", SAMPLES + "throttling:ThrottlingSample"),
    ProbeKind("openapi", "crdscope.probes.openapi", SAMPLES + "openapi:OpenAPISample"),
    ProbeKind("health", "crdscope.probes.health", SAMPLES + "health:HealthSample"),
    ProbeKind("latency", "crdscope.probes.latency", SAMPLES + "latency:LatencySample"),
    ProbeKind("responsiveness", "crdscope.probes.responsiveness", SAMPLES + "responsiveness:ResponsivenessSample"),
    ProbeKind("webhooks", "crdscope.probes.webhooks", SAMPLES + "webhooks:WebhooksSample"),
    ProbeKind("footprint", "crdscope.probes.footprint", SAMPLES + "footprint:FootprintSample", oneshot=None),
    # Not a probe: the loader's progress, recorded and replayed like a probe's samples.
    ProbeKind("loader", SAMPLES + "loader", "LoaderSample", factory=None, oneshot=None),
)



def _kind(name: str) -> ProbeKind | None:
    """The row of probe ``name`` (read from :data:`PROBES` at each call: a dozen rows)."""
    return next((kind for kind in PROBES if kind.name == name), None)


def monitor_probes() -> list[str]:
    """Names of the probes a monitor runs by default, in display order."""
    return [kind.name for kind in PROBES if kind.factory]


def oneshot_probes() -> list[str]:
    """Names ``crdscope probe <name>`` accepts."""
    return [kind.name for kind in PROBES if kind.oneshot]


def _attribute(module: str, name: str) -> Any:
    return getattr(importlib.import_module(module), name)


def factory(name: str) -> Callable[[ProbeParts], Probe]:
    """The monitor factory of probe ``name`` (:class:`KeyError` when the monitor cannot run it)."""
    kind = _kind(name)
    if kind is None or kind.factory is None:
        raise KeyError(name)
    built: Callable[[ProbeParts], Probe] = _attribute(kind.module, kind.factory)
    return built


def oneshot(name: str) -> Callable[..., Awaitable[Sample]]:
    """The one-shot function of probe ``name``; :class:`ConfigError` for an unknown name."""
    kind = _kind(name)
    if kind is None or kind.oneshot is None:
        raise ConfigError(f"unknown probe '{name}' (one of: {', '.join(sorted(oneshot_probes()))})")
    function: Callable[..., Awaitable[Sample]] = _attribute(kind.module, kind.oneshot)
    return function


def sample_type(name: str) -> type[Sample]:
    """The Sample subclass recorded under ``name``; the base class when unknown to this build."""
    kind = _kind(name)
    if kind is not None:
        module, _, name = kind.sample.rpartition(":")
        try:
            found = _attribute(module or kind.module, name)
        except (ImportError, AttributeError):  # a build without that module (e.g. no loader)
            found = None
        if isinstance(found, type) and issubclass(found, Sample):
            return found
    return SAMPLE_TYPES.get(name, Sample)
