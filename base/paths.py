"""XDG base directories for crdscope: the one place that knows where files live.

It sits in ``base``, the foundations every other package imports (and which import none of them).
"""

from __future__ import annotations

import os
from pathlib import Path

APP = "crdscope"


def _xdg(env: str, default: str) -> Path:
    value = os.environ.get(env, "")
    # The XDG spec says relative paths are invalid and must be ignored.
    base = Path(value) if value and os.path.isabs(value) else Path.home() / default
    return base / APP


def config_dir() -> Path:
    """Directory of ``config.toml`` (``$XDG_CONFIG_HOME/crdscope``)."""
    return _xdg("XDG_CONFIG_HOME", ".config")


def data_dir() -> Path:
    """Directory of recordings and screenshots (``$XDG_DATA_HOME/crdscope``)."""
    return _xdg("XDG_DATA_HOME", ".local/share")


def state_dir() -> Path:
    """Directory of the lab's state file and logs (``$XDG_STATE_HOME/crdscope``)."""
    return _xdg("XDG_STATE_HOME", ".local/state")


def cache_dir() -> Path:
    """Directory of built control-plane binaries (``$XDG_CACHE_HOME/crdscope``)."""
    return _xdg("XDG_CACHE_HOME", ".cache")


def config_file() -> Path:
    """The settings file, ``config.toml`` in :func:`config_dir`."""
    return config_dir() / "config.toml"
