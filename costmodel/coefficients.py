"""The committed coefficients (``coefficients.json``) and choosing a Kubernetes minor's.

The file holds, per minor (``"1.37"``), the lab's figures with no CRDs
(``baseline``), the fitted terms of each figure (``figures``) and where they
came from (``provenance``).  A minor without its own coefficients uses the
nearest calibrated one, and says so.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from crdscope.base.errors import ConfigError

COEFFICIENTS_FILE = Path(__file__).with_name("coefficients.json")
#: 2: ``install_seconds`` is ``max(CRDs / pace, server terms) + tail`` (``"model": "paced"``); 1: a plain
#: sum of terms.  Every format in :data:`READABLE_FORMATS` is read (a minor's figure says its shape).
FORMAT = 2
READABLE_FORMATS = (1, 2)
_MINOR = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?$")


def parse_minor(text: str) -> tuple[int, int]:
    """``1.37``, ``v1.37`` or ``1.37.2`` -> (1, 37); a :class:`ConfigError` otherwise."""
    match = _MINOR.match(text.strip())
    if not match:
        raise ConfigError(f"--kubernetes {text!r}: expected a minor version such as 1.37")
    return int(match.group(1)), int(match.group(2))


@dataclass(frozen=True)
class Coefficients:
    """One minor's coefficients, and which minor was asked for."""

    requested: str
    minor: str
    data: dict[str, Any]

    @property
    def note(self) -> str:
        """Which coefficients are used, said plainly."""
        version = self.data.get("kubernetes_version", self.minor)
        if self.requested == self.minor:
            return f"model for {self.minor} (calibrated on {version})"
        return (f"model for {self.minor} (calibrated on {version}): {self.requested} has no coefficients "
                f"of its own, the nearest calibrated minor is used")

    @property
    def baseline(self) -> dict[str, Any]:
        """The lab's figures with no CRDs."""
        return dict(self.data.get("baseline") or {})

    def figure(self, name: str) -> dict[str, Any]:
        """One fitted figure: ``terms`` (name -> coefficient) and ``relative_rms``."""
        return dict((self.data.get("figures") or {}).get(name) or {})


@cache
def _load(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cost model coefficients unreadable ({path}): {exc}") from None
    if document.get("format") not in READABLE_FORMATS or not document.get("minors"):
        raise ConfigError(f"cost model coefficients in {path} are not of format "
                          f"{' or '.join(map(str, READABLE_FORMATS))} or hold no minor")
    return dict(document)


def forget_loaded() -> None:
    """Read the files again next time (after one was rewritten in this process)."""
    _load.cache_clear()


def calibrated_minors(path: Path = COEFFICIENTS_FILE) -> list[str]:
    """The minors with coefficients of their own, oldest first."""
    return sorted(_load(path)["minors"], key=parse_minor)


def for_minor(requested: str, path: Path = COEFFICIENTS_FILE) -> Coefficients:
    """The coefficients of ``requested`` (``1.37``), or of the nearest calibrated minor."""
    wanted = parse_minor(requested)
    minors = _load(path)["minors"]
    name = f"{wanted[0]}.{wanted[1]}"
    if name not in minors:
        # Nearest by minor number; a tie goes to the newer one (the API server only gets leaner
        # at CRD scale between releases, so the newer figure is the better guess for neither).
        name = min(minors, key=lambda m: (abs(parse_minor(m)[1] - wanted[1]), -parse_minor(m)[1]))
    return Coefficients(f"{wanted[0]}.{wanted[1]}", name, dict(minors[name]))
