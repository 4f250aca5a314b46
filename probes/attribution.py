"""Attribution: what the cluster's own CRDs hold of the API server's memory, by the cost model, group by group.

No request of its own.  The shared CRD watch keeps, per API group, the terms the cost model prices a
CRD by (its served versions and the bytes of their schemas, measured as each CRD is decoded:
``connection.crdwatch.TermsByGroup``), updated as CRDs change; each run hands the latest terms, the
health sample's MRD count and resident memory, the server's minor (the version sample) and the memory
limit to the cost model's pricing, which the session put in the facts (``ClusterFacts.pricing``:
probes never import the cost model).  Pricing a few hundred groups is a few hundred multiplications:
nothing is re-priced per frame, and front ends read the sample (panels, the headless watch, doctor,
the exporter's ``crdscope_attribution_memory_bytes{group=...}``, recordings and replays).

Without the pricing (a session that gave none), before the watch has listed, before the server's
version is known, or where no coefficients are installed, the sample says why in ``unobservable``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from crdscope.base.errors import ConfigError
from crdscope.base.facts import ClusterFacts
from crdscope.base.samples.attribution import AttributionSample
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.version import VersionSample
from crdscope.connection.crdwatch import CRDWatch

from .probe import Pacing, ProbeBase

if TYPE_CHECKING:
    from collections.abc import Mapping

    from crdscope.base.samples import Sample

    from .probe import ProbeParts

#: Why a sample prices nothing, by what is missing.
NO_PRICING = "no cost model in this session"
NOT_LISTED = "the CRD watch has not listed CRDs yet"
NO_VERSION = "the server's version is not known yet"


class AttributionProbe(ProbeBase):
    """Prices the CRD watch's terms per group through the facts' pricing, once a run."""

    name = "attribution"
    #: The health probe's pacing (its RSS and MRD count are what the figures are set against); no
    #: request of its own.  ``[cadences] attribution`` and ``attribution_idle`` override it.
    pacing = Pacing(busy=10.0, idle=20.0)

    def __init__(self, crds: CRDWatch, facts: ClusterFacts, latest: Mapping[str, Sample],
                 pacing: Pacing | None = None) -> None:
        self.crds = crds
        self.facts = facts
        self.latest = latest
        if pacing is not None:
            self.pacing = pacing

    async def run(self) -> AttributionSample:
        pricing = self.facts.pricing
        version = self.latest.get(VersionSample.probe)
        minor = version.kubernetes_minor if isinstance(version, VersionSample) else ""
        missing = (NO_PRICING if pricing is None else NOT_LISTED if not self.crds.status.synced
                   else NO_VERSION if not minor else "")
        if pricing is None or missing:
            return AttributionSample(unobservable={"crd_memory_bytes": missing})
        health = self.latest.get(HealthSample.probe)
        health = health if isinstance(health, HealthSample) and health.ok else None
        rss = float(health.rss_bytes) if health is not None and health.rss_bytes is not None else None
        try:
            sample = pricing(minor, self.crds.terms.snapshot(), mrds=health.mrds if health is not None else None,
                             rss_bytes=rss, memory_limit_bytes=self.facts.memory_limit_bytes)
        except ConfigError as exc:  # no coefficients installed: said, not failed
            return AttributionSample(kubernetes_minor=minor, unobservable={"crd_memory_bytes": str(exc)})
        unobservable = dict(sample.unobservable)
        if health is None or health.mrds is None:
            unobservable["mrd_memory_bytes"] = "no MRD count (see health.mrds)"
        if rss is None:
            unobservable["rss_bytes"] = "no resident memory figure (see health.rss_bytes)"
        return dataclasses.replace(sample, unobservable=unobservable)


def make_probe(parts: ProbeParts) -> AttributionProbe:
    """The attribution probe on the monitor's CRD watch, the session's facts and the latest samples."""
    return AttributionProbe(parts.crds, parts.facts, parts.latest, parts.pacing(AttributionProbe.name))
