"""Observers of one Kubernetes API server.

Everything in this package is plain asyncio + httpx: no textual, no rich
(tests/unit/test_import_hygiene.py enforces it), so every probe can be used
from a script, the headless watcher or the TUI alike.
"""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("crdscope")
except _metadata.PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+src"

USER_AGENT = f"crdscope/{__version__}"
