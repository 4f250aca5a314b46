"""Memory attribution on a live cluster: what its own CRDs hold of the API server's memory, priced
by their own schemas, and what Crossplane's MRDs hold apart.

The CRD watch keeps, per API group, the terms the model prices a CRD by (how many CRDs, their served
versions, their schemas' bytes: ``connection.crdwatch.TermsByGroup``); :func:`attribute_groups` prices
them with the coefficients of the server's minor, group by group, into an
:class:`~base.samples.attribution.AttributionSample`.  The attribution probe asks for it through the
session's facts (``ClusterFacts.pricing``: probes never import the cost model), so every front end
reads the same figures from the store, a recording or a collector's stream.

The model was calibrated on CRDs installed directly; CRDs that Crossplane makes by activating MRDs
are priced the same way here: the attribution reads what is there, not how it came (the activation
path's own price, where a minor is calibrated for it, is :func:`activated_crd_bytes`, for plans).  The one-time cost of
a server's first CRDs (the ``fixed`` term) belongs to no group; it is counted in the total only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from crdscope.base.activation import MRD_BYTES
from crdscope.base.samples.attribution import MAX_GROUPS, MIB, OTHER_GROUPS, AttributionSample, GroupTerms

from .coefficients import for_minor
from .model import Interval, linear, relative_interval


def typical_terms(minor: str) -> dict[str, float]:
    """The regressors of one typical CRD (the calibration's real set; one version, 30 KB if absent)."""
    typical = for_minor(minor).data.get("typical_crd") or {}
    return {"crds": 1.0, "served_versions": float(typical.get("served_versions", 1.0)),
            "schema_bytes": float(typical.get("schema_bytes", 30_000.0))}


def group_terms(terms: GroupTerms) -> dict[str, float]:
    """A group's regressors, named as the coefficient file's terms."""
    return {"crds": float(terms.crds), "served_versions": float(terms.served_versions),
            "schema_bytes": float(terms.schema_bytes)}


def attribute_groups(kubernetes_minor: str, groups: Mapping[str, GroupTerms], *, mrds: int | None = None,
                     rss_bytes: float | None = None, memory_limit_bytes: float | None = None) -> AttributionSample:
    """What the CRDs of ``groups`` hold of an API server of ``kubernetes_minor`` by the model, each
    group's apart, and what ``mrds`` Crossplane MRDs hold at their measured cost
    (:data:`base.activation.MRD_BYTES`); with ``rss_bytes`` and a limit, how many more CRDs like these
    (their mean) fit under it.  Raises :class:`ConfigError` where no coefficients are installed."""
    coefficients = for_minor(kubernetes_minor)
    priced = {group: linear(coefficients, "rss_bytes", group_terms(terms)) for group, terms in groups.items()}
    kept = dict(sorted(priced.items(), key=lambda item: (-item[1], item[0]))[:MAX_GROUPS])
    if len(priced) > len(kept):
        kept[OTHER_GROUPS] = sum(priced.values()) - sum(kept.values())
    crds = sum(terms.crds for terms in groups.values())
    first = linear(coefficients, "rss_bytes", {"fixed": 1.0}) if crds else 0.0
    held = sum(priced.values())
    per_crd = held / crds if crds else None
    headroom = None
    if memory_limit_bytes is not None and rss_bytes is not None and per_crd:
        headroom = max(0, int((memory_limit_bytes - rss_bytes) // per_crd))
    return AttributionSample(
        model_minor=coefficients.minor, kubernetes_minor=coefficients.requested, crds=crds, groups=len(groups),
        memory_bytes=kept, other_groups=max(0, len(priced) - MAX_GROUPS), crd_memory_bytes=held + first,
        first_crds_bytes=first, relative_interval=relative_interval(coefficients, "rss_bytes"),
        mib_per_crd=per_crd / MIB if per_crd is not None else None, mrds=mrds,
        mrd_memory_bytes=(mrds * MRD_BYTES) if mrds is not None else None, rss_bytes=rss_bytes,
        headroom_crds=headroom)


def activated_crd_bytes(kubernetes_minor: str) -> tuple[float, str]:
    """Resident memory one typical CRD adds when Crossplane creates it (an MRAP activating its MRD), by the
    activation path's coefficients, and which path and calibration priced it; where no minor's activation
    path is calibrated, the direct figure and that note."""
    from .coefficients import activation_for
    from .model import UNCALIBRATED_ACTIVATION_NOTE

    priced = activation_for(kubernetes_minor)
    figures = (priced or for_minor(kubernetes_minor)).figure("rss_bytes")
    terms = figures.get("terms") or {}
    per_crd = sum(float(terms.get(name, 0.0)) * value for name, value in typical_terms(kubernetes_minor).items())
    return per_crd, priced.note if priced is not None else UNCALIBRATED_ACTIVATION_NOTE


@dataclass(frozen=True)
class StartupNeed:
    """The resident memory an API server needs with ``crds`` CRDs (what a limit must hold), by the
    cost model: the server without CRDs (its calibration's baseline) plus what the CRDs add (the first
    CRDs' one-time cost and each CRD's terms), the latter with the model's interval, as
    :func:`costmodel.model.estimate` prices an install on an empty cluster (``rss_after_bytes``)."""

    minor: str
    crds: int
    #: The server with no CRDs plus the first CRDs' one-time cost.
    base_bytes: float
    #: The mean CRD's terms (each CRD's own where they were counted, else the typical CRD's).
    per_crd_bytes: float
    #: The calibrated server without CRDs (not widened: a measurement, not a prediction).
    baseline_bytes: float = 0.0
    #: The half-width of the model's interval, relative to what the CRDs add (at least 25%).
    relative: float = 0.0
    #: True: priced from the CRDs' own served versions and schema bytes; False: as typical CRDs of
    #: the calibration's real provider set.
    own_terms: bool = False

    @property
    def total_bytes(self) -> float:
        """Base plus every CRD: the model's value."""
        return self.base_bytes + self.per_crd_bytes * self.crds

    @property
    def crd_bytes(self) -> Interval:
        """What the CRDs add to the server without them, with the model's interval."""
        return Interval.around(self.total_bytes - self.baseline_bytes, self.relative)

    @property
    def high_bytes(self) -> float:
        """The upper end of the model's interval: the server without CRDs plus the CRDs' high end."""
        return self.baseline_bytes + self.crd_bytes.high


def startup_need(crds: int, kubernetes_minor: str, *, served_versions: float | None = None,
                 schema_bytes: float | None = None) -> StartupNeed:
    """What ``crds`` CRDs make an API server of ``kubernetes_minor`` hold, from its model: priced by
    their own totals of served versions and schema bytes where both are given (the CRD watch counts
    them), else as typical CRDs.

    The crash-loop finding compares it with a memory limit: a server that reloads every CRD
    from etcd at start-up holds at least this much before it serves.
    """
    coefficients = for_minor(kubernetes_minor)
    terms = coefficients.figure("rss_bytes").get("terms") or {}
    own = bool(crds and served_versions and schema_bytes)
    mean = typical_terms(kubernetes_minor)
    if own:
        mean = {"crds": 1.0, "served_versions": float(served_versions or 0) / crds,
                "schema_bytes": float(schema_bytes or 0) / crds}
    per_crd = sum(float(terms.get(name, 0.0)) * value for name, value in mean.items())
    baseline = float(coefficients.baseline.get("rss_bytes") or 0.0)
    base = baseline + (float(terms.get("fixed", 0.0)) if crds else 0.0)
    return StartupNeed(coefficients.minor, crds, base, per_crd, baseline, relative_interval(coefficients, "rss_bytes"),
                       own)
