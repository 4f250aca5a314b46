"""Every kind of sample, named once: its probe class, its factory, its one-shot form, its sample type.

The monitor builds its probes from :data:`PROBES` (in this order, which is the order panels and
reports list them in), ``crdscope probe <name>`` runs the one-shot form, and replay and
``--fail-if`` find a probe's sample type here.

Each row names the probe and how to load it: ``load`` imports the probe's module when first asked
(a function whose imports the type checker follows, so the CLI starts without importing every
probe), and ``samples`` is the module that defines the sample type, imported alone for replay and
``--fail-if`` (the type itself is found in :data:`base.samples.SAMPLE_TYPES`, which every
``Sample`` subclass joins under its ``probe`` name).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from crdscope.base.errors import ConfigError
from crdscope.base.samples import SAMPLE_TYPES, Sample

from .probe import Pacing, paced

if TYPE_CHECKING:
    from crdscope.base.settings import Cadences, RequestBudgets

    from .probe import Probe, ProbeBase, ProbeParts


@dataclass(frozen=True)
class ProbeEntry:
    """What a probe's module offers, once imported."""

    #: The probe's class: its declaration (``name``, ``pacing``).
    probe: type[ProbeBase]
    #: The type of its samples (defined in the row's ``samples`` module).
    sample: type[Sample]
    #: ``make_probe(parts) -> Probe``: the monitor's factory.
    factory: Callable[[ProbeParts], Probe]
    #: ``async def once(cluster, **options) -> Sample``; None: no ``crdscope probe`` form.
    oneshot: Callable[..., Awaitable[Sample]] | None = None


@dataclass(frozen=True)
class ProbeKind:
    """One row of the table: a probe (or a recorded kind of sample) and where it lives."""

    name: str
    #: The module defining the sample type (``crdscope.base.samples.<name>`` for the built-in probes).
    samples: str
    #: Imports the probe's module; None: the monitor runs nothing of this name (the loader's samples).
    load: Callable[[], ProbeEntry] | None = None
    #: Whether ``crdscope probe <name>`` runs it (known without importing the module).
    oneshot: bool = True

    def entry(self) -> ProbeEntry:
        """The imported entry (:class:`KeyError` for a row that is no probe)."""
        if self.load is None:
            raise KeyError(self.name)
        return _loaded(self.load)


@functools.cache
def _loaded(load: Callable[[], ProbeEntry]) -> ProbeEntry:
    return load()


# -- the built-in probes: each function imports one probe's module ------------------------------

def _version() -> ProbeEntry:
    from . import version
    from crdscope.base.samples.version import VersionSample
    return ProbeEntry(version.VersionProbe, VersionSample, version.make_probe, version.probe_version)


def _inventory() -> ProbeEntry:
    from . import inventory
    from crdscope.base.samples.inventory import InventorySample
    return ProbeEntry(inventory.InventoryProbe, InventorySample, inventory.make_probe, inventory.once)


def _discovery() -> ProbeEntry:
    from . import discovery
    from crdscope.base.samples.discovery import DiscoverySample
    return ProbeEntry(discovery.DiscoveryProbe, DiscoverySample, discovery.make_probe, discovery.once)


def _throttling() -> ProbeEntry:
    from . import throttling
    from crdscope.base.samples.throttling import ThrottlingSample
    return ProbeEntry(throttling.ThrottlingProbe, ThrottlingSample, throttling.make_probe, throttling.once)


def _openapi() -> ProbeEntry:
    from . import openapi
    from crdscope.base.samples.openapi import OpenAPISample
    return ProbeEntry(openapi.OpenAPIProbe, OpenAPISample, openapi.make_probe, openapi.once)


def _health() -> ProbeEntry:
    from . import health
    from crdscope.base.samples.health import HealthSample
    return ProbeEntry(health.HealthProbe, HealthSample, health.make_probe, health.once)


def _latency() -> ProbeEntry:
    from . import latency
    from crdscope.base.samples.latency import LatencySample
    return ProbeEntry(latency.LatencyProbe, LatencySample, latency.make_probe, latency.once)


def _responsiveness() -> ProbeEntry:
    from . import responsiveness
    from crdscope.base.samples.responsiveness import ResponsivenessSample
    return ProbeEntry(responsiveness.ResponsivenessProbe, ResponsivenessSample, responsiveness.make_probe,
                      responsiveness.once)


def _webhooks() -> ProbeEntry:
    from . import webhooks
    from crdscope.base.samples.webhooks import WebhooksSample
    return ProbeEntry(webhooks.WebhooksProbe, WebhooksSample, webhooks.make_probe, webhooks.once)


def _attribution() -> ProbeEntry:
    from . import attribution
    from crdscope.base.samples.attribution import AttributionSample
    return ProbeEntry(attribution.AttributionProbe, AttributionSample, attribution.make_probe)


def _footprint() -> ProbeEntry:
    from . import footprint
    from crdscope.base.samples.footprint import FootprintSample
    return ProbeEntry(footprint.FootprintProbe, FootprintSample, footprint.make_probe)


#: Where the probes' samples live.
SAMPLES = "crdscope.base.samples."

PROBES: tuple[ProbeKind, ...] = (
    ProbeKind("version", SAMPLES + "version", _version),
    ProbeKind("inventory", SAMPLES + "inventory", _inventory),
    ProbeKind("discovery", SAMPLES + "discovery", _discovery),
    ProbeKind("throttling", SAMPLES + "throttling", _throttling),
    ProbeKind("openapi", SAMPLES + "openapi", _openapi),
    ProbeKind("health", SAMPLES + "health", _health),
    ProbeKind("latency", SAMPLES + "latency", _latency),
    ProbeKind("responsiveness", SAMPLES + "responsiveness", _responsiveness),
    ProbeKind("webhooks", SAMPLES + "webhooks", _webhooks),
    ProbeKind("attribution", SAMPLES + "attribution", _attribution, oneshot=False),
    ProbeKind("footprint", SAMPLES + "footprint", _footprint, oneshot=False),
    # Not a probe: the loader's progress, recorded and replayed like a probe's samples.
    ProbeKind("loader", SAMPLES + "loader", oneshot=False),
)


def _kind(name: str) -> ProbeKind | None:
    """The row of probe ``name`` (read from :data:`PROBES` at each call: a dozen rows)."""
    return next((kind for kind in PROBES if kind.name == name), None)


def monitor_probes() -> list[str]:
    """Names of the probes a monitor runs by default, in display order."""
    return [kind.name for kind in PROBES if kind.load is not None]


def oneshot_probes() -> list[str]:
    """Names ``crdscope probe <name>`` accepts."""
    return [kind.name for kind in PROBES if kind.load is not None and kind.oneshot]


def entry(name: str) -> ProbeEntry:
    """The imported entry of probe ``name`` (:class:`KeyError` when the monitor cannot run it)."""
    kind = _kind(name)
    if kind is None:
        raise KeyError(name)
    return kind.entry()


def factory(name: str) -> Callable[[ProbeParts], Probe]:
    """The monitor factory of probe ``name`` (:class:`KeyError` when the monitor cannot run it)."""
    return entry(name).factory


def oneshot(name: str) -> Callable[..., Awaitable[Sample]]:
    """The one-shot function of probe ``name``; :class:`ConfigError` for an unknown name."""
    kind = _kind(name)
    function = kind.entry().oneshot if kind is not None and kind.load is not None and kind.oneshot else None
    if function is None:
        raise ConfigError(f"unknown probe '{name}' (one of: {', '.join(sorted(oneshot_probes()))})")
    return function


def sample_type(name: str) -> type[Sample]:
    """The Sample subclass recorded under ``name``; the base class when unknown to this build."""
    found = SAMPLE_TYPES.get(name)
    if found is not None:
        return found
    kind = _kind(name)
    if kind is not None:
        try:
            importlib.import_module(kind.samples)  # its Sample subclasses join SAMPLE_TYPES
        except ImportError:  # a build without that module (e.g. no loader)
            return Sample
    return SAMPLE_TYPES.get(name, Sample)


def pacing_of(name: str, cadences: Cadences, budgets: RequestBudgets | None = None) -> Pacing | None:
    """Probe ``name``'s pacing as configured: its declaration with ``config.toml``'s keys over it
    (None: no probe of that name runs in a monitor).  Imports the probe's module."""
    kind = _kind(name)
    if kind is None or kind.load is None:
        return None
    return paced(name, kind.entry().probe.pacing, cadences, budgets)
