"""Observers of one Kubernetes API server.

Everything in this package is plain asyncio + httpx: no textual, no rich
(tests/unit/test_import_hygiene.py enforces it), so every probe can be used
from a script, the headless watcher or the TUI alike.
"""
