"""The cost model: what installing a set of CRDs will cost an API server (UI-free).

``estimate(crds, kubernetes_minor) -> Estimate`` is the API for other layers (findings,
the TUI); ``crds`` are loader documents or :class:`~.features.CRDFeatures`.
"""

from .model import Estimate, Target, estimate

__all__ = ["Estimate", "Target", "estimate"]
