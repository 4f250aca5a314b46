"""A toy probe, added the way docs/architecture.md says a probe is added (tests/e2e/test_toy_probe.py)."""
