"""The attribution probe's sample: what the cost model says the cluster's own CRDs hold of the API
server's memory, priced by their own schemas, and Crossplane's MRDs apart (the probe is
``probes/attribution.py``, the pricing ``costmodel/attribution.py``; readers import the sample from here).
"""

from __future__ import annotations

import dataclasses

from crdscope.base.samples import Sample, figure

GIB = float(1 << 30)
MIB = float(1 << 20)
#: Groups priced one by one (a series each on the exporter): the costliest this many, the rest summed
#: under :data:`OTHER_GROUPS`.  The AWS provider family has 354 API groups (its services, cluster-scoped
#: and namespaced), GCP's 162: every group of a real family keeps its own series.
MAX_GROUPS = 500
OTHER_GROUPS = "(other)"


@dataclasses.dataclass(frozen=True)
class GroupTerms:
    """One API group's CRDs as the cost model sees them: how many, their served versions (at least one
    each) and their served versions' schemas in bytes of compact JSON (``costmodel.features``)."""

    crds: int = 0
    served_versions: int = 0
    schema_bytes: int = 0

    def plus(self, crds: int, served_versions: int, schema_bytes: int) -> GroupTerms:
        """These terms with one CRD's added (negative figures take one out)."""
        return GroupTerms(self.crds + crds, self.served_versions + served_versions, self.schema_bytes + schema_bytes)


@dataclasses.dataclass(frozen=True, kw_only=True)
class AttributionSample(Sample):
    """The memory the cost model puts on each API group's CRDs (by their own schemas) and on the MRDs."""

    probe = "attribution"
    short_name = "attr"

    #: The minor whose coefficients priced the CRDs, and the server's when it has none of its own.
    model_minor: str = ""
    kubernetes_minor: str = ""
    crds: int = 0
    groups: int = 0
    #: Per API group: the memory its CRDs hold by the model (the first CRDs' one-time cost apart);
    #: ``crdscope_attribution_memory_bytes{group=...}``.  At most :data:`MAX_GROUPS` keys.
    memory_bytes: dict[str, float] = figure(default_factory=dict, label="group")
    #: Groups summed under :data:`OTHER_GROUPS` beyond :data:`MAX_GROUPS`.
    other_groups: int = 0
    #: The CRDs' memory in all: every group's, and the one-time cost of a server's first CRDs.
    crd_memory_bytes: float | None = None
    first_crds_bytes: float | None = None
    #: The model's interval on it (relative half-width: 0.25 is +-25%).
    relative_interval: float | None = None
    #: MiB per CRD, the model's mean over the cluster's CRDs (the first CRDs' cost apart): what the
    #: health probe's live fit (``health.mib_per_crd_own``) measures of the CRDs that came and went.
    mib_per_crd: float | None = None
    #: Crossplane MRDs stored (the health sample's count) and what they hold at their measured cost.
    mrds: int | None = None
    mrd_memory_bytes: float | None = None
    #: The API server's resident memory the figures are set against (the health sample's).
    rss_bytes: float | None = None
    #: More CRDs like these (the mean) before the memory limit (None without a limit or RSS).
    headroom_crds: int | None = None
    #: field -> why it has no value.
    unobservable: dict[str, str] = dataclasses.field(default_factory=dict)


def attribution_line(sample: AttributionSample) -> str:
    """``CRDs ~ 4.6 GiB by their schemas (2,065 CRDs, 2.2 MiB each) · 817 MRDs ~ 0.6 GiB, of 5.4 GiB RSS
    (model for 1.37) · headroom ~ 310 more CRDs like these``; "" while nothing is priced."""
    if sample.crd_memory_bytes is None:
        return ""
    each = f", {sample.mib_per_crd:.1f} MiB each" if sample.mib_per_crd is not None else ""
    text = f"CRDs ~ {sample.crd_memory_bytes / GIB:.2f} GiB by their schemas ({sample.crds:,} CRDs{each})"
    if sample.mrds and sample.mrd_memory_bytes is not None:
        text += f" · {sample.mrds:,} MRDs ~ {sample.mrd_memory_bytes / GIB:.2f} GiB"
    if sample.rss_bytes:
        text += f", of {sample.rss_bytes / GIB:.1f} GiB RSS"
    nearest = (f", nearest to {sample.kubernetes_minor}"
               if sample.kubernetes_minor and sample.kubernetes_minor != sample.model_minor else "")
    text += f" (model for {sample.model_minor}{nearest})"
    if sample.headroom_crds is not None:
        text += f" · headroom ~ {sample.headroom_crds:,} more CRDs like these"
    return text


def costliest_groups(sample: AttributionSample, count: int = 3) -> list[tuple[str, float]]:
    """The ``count`` groups whose CRDs hold the most, costliest first."""
    return sorted(sample.memory_bytes.items(), key=lambda item: (-item[1], item[0]))[:count]


def attribution_summary(sample: AttributionSample | None) -> str:
    """:func:`attribution_line` and the three costliest groups ("" while nothing is priced): what the
    memory findings' evidence, ``doctor`` and the headless watch say of it."""
    line = attribution_line(sample) if sample is not None else ""
    if sample is None or not line:
        return ""
    groups = ", ".join(f"{group} {held / GIB:.2f} GiB" for group, held in costliest_groups(sample))
    return line + (f"; costliest groups: {groups}" if groups else "")
