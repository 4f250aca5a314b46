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
    """The resident memory an API server needs with ``crds`` typical CRDs (what a limit must hold)."""

    minor: str
    crds: int
    #: The server with no CRD (the calibration's baseline) plus the first CRDs' one-time cost.
    base_bytes: float
    per_crd_bytes: float

    @property
    def total_bytes(self) -> float:
        """Base plus every CRD."""
        return self.base_bytes + self.per_crd_bytes * self.crds


def startup_need(crds: int, kubernetes_minor: str) -> StartupNeed:
    """What ``crds`` typical CRDs make an API server of ``kubernetes_minor`` hold, from its model.

    The crash-loop finding compares it with a memory limit: a server that reloads every CRD
    from etcd at start-up holds at least this much before it serves.
    """
    coefficients = for_minor(kubernetes_minor)
    terms = coefficients.figure("rss_bytes").get("terms") or {}
    per_crd = sum(float(terms.get(name, 0.0)) * value for name, value in typical_terms(kubernetes_minor).items())
    base = float(coefficients.baseline.get("rss_bytes") or 0.0) + (float(terms.get("fixed", 0.0)) if crds else 0.0)
    return StartupNeed(coefficients.minor, crds, base, per_crd)
