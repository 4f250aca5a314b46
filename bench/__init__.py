"""Benchmarks: crdscope against kubectl and against physical floors, as ratios measured pair by pair."""
