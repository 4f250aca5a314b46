"""Give freed memory back to the operating system.

Big answers (the first CRD list: about 100 MB of JSON for the whole AWS provider set, discovery
documents, ``/metrics`` text) are parsed into short-lived objects; CPython frees them, but glibc's
allocator keeps the freed pages of its heaps for later, so the process's resident memory stays at
its peak for hours.  ``malloc_trim(0)`` returns them.  Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging

log = logging.getLogger("crdscope.heap")


@functools.cache
def _libc_trim() -> object | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None)
    except OSError:
        return None


def give_back_freed_memory() -> bool:
    """Return the allocator's freed pages to the system; True where that is possible (glibc)."""
    trim = _libc_trim()
    if trim is None:
        return False
    try:
        trim(0)  # type: ignore[operator]  # a ctypes function
    except OSError:  # pragma: no cover - a libc without it behaves as none
        return False
    return True
