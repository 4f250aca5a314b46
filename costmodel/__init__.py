"""The cost model: what installing a set of CRDs will cost an API server (UI-free)."""
