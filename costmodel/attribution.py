"""Memory attribution on a live cluster from one CRD count: "CRDs ~ X GiB of Y GiB RSS".

A watched cluster whose CRDs were installed before the monitor started has no
two CRD counts to fit a line through; the model prices its CRDs instead, as
typical CRDs of the calibration's real provider set (mean served versions and
schema bytes), and says which version's model it used.
"""

from __future__ import annotations

from dataclasses import dataclass

from crdscope.base.activation import MRD_BYTES

from .coefficients import for_minor
from .model import Interval, relative_interval

GIB = float(1 << 30)
MIB = float(1 << 20)


@dataclass(frozen=True)
class Attribution:
    """The memory the model puts on a cluster's CRDs, and the headroom under a limit."""

    crds: int
    crd_bytes: Interval
    per_crd_bytes: float
    rss_bytes: float | None
    minor: str
    note: str
    memory_limit_bytes: float | None = None
    #: more CRDs like the typical one before the limit (None without a limit or RSS)
    headroom_crds: int | None = None
    #: the cluster's minor, when it has no coefficients of its own
    requested: str = ""
    #: Crossplane MRDs stored, and what they hold at their measured cost (MRDs are not CRDs: an MRAP
    #: that keeps a kind inactive saves its CRD's memory, not its MRD's)
    mrds: int = 0
    mrd_bytes: float = 0.0

    def line(self) -> str:
        """``CRDs ~ 1.2 GiB of 3.4 GiB RSS (model for 1.37)``, with MRDs ``CRDs ~ 1.2 GiB · 817 MRDs ~ 0.6 GiB ...``."""
        of = f" of {self.rss_bytes / GIB:.1f} GiB RSS" if self.rss_bytes else ""
        nearest = f", nearest to {self.requested}" if self.requested and self.requested != self.minor else ""
        mrds = f" · {self.mrds:,} MRDs ~ {self.mrd_bytes / GIB:.1f} GiB" if self.mrds else ""
        text = f"CRDs ~ {self.crd_bytes.value / GIB:.1f} GiB{mrds}{of} (model for {self.minor}{nearest})"
        if self.headroom_crds is not None:
            text += f" · headroom ~ {self.headroom_crds} more CRDs like these"
        return text


def typical_terms(minor: str) -> dict[str, float]:
    """The regressors of one typical CRD (the calibration's real set; one version, 30 KB if absent)."""
    typical = for_minor(minor).data.get("typical_crd") or {}
    return {"crds": 1.0, "served_versions": float(typical.get("served_versions", 1.0)),
            "schema_bytes": float(typical.get("schema_bytes", 30_000.0))}


def attribute(crds: int, rss_bytes: float | None, kubernetes_minor: str, *,
              memory_limit_bytes: float | None = None, mrds: int | None = None) -> Attribution:
    """What ``crds`` typical CRDs (and ``mrds`` Crossplane MRDs, at their measured cost) hold of an API
    server's RSS, by the model of ``kubernetes_minor``."""
    coefficients = for_minor(kubernetes_minor)
    terms = coefficients.figure("rss_bytes").get("terms") or {}
    per_crd = sum(float(terms.get(name, 0.0)) * value for name, value in typical_terms(kubernetes_minor).items())
    fixed = float(terms.get("fixed", 0.0)) if crds else 0.0
    total = Interval.around(fixed + per_crd * crds, relative_interval(coefficients, "rss_bytes"))
    headroom = None
    if memory_limit_bytes is not None and rss_bytes is not None and per_crd > 0:
        headroom = max(0, int((memory_limit_bytes - rss_bytes) // per_crd))
    return Attribution(crds, total, per_crd, rss_bytes, coefficients.minor, coefficients.note, memory_limit_bytes,
                       headroom, coefficients.requested, mrds or 0, (mrds or 0) * MRD_BYTES)


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
