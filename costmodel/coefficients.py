"""The committed coefficients (``coefficients.json``) and choosing a Kubernetes minor's.

The file holds, per minor (``"1.37"``), the lab's figures with no CRDs
(``baseline``), the fitted terms of each figure (``figures``) and where they
came from (``provenance``).  A minor without its own coefficients uses the
nearest calibrated one, and says so (and that it lies outside the calibrated
range, when it does); a minor calibrated on a pre-release says that too.

A minor may also hold ``activation``: the same CRDs' costs when Crossplane creates them, as an MRAP
activates their ManagedResourceDefinitions (``bench/activation.py``), which hold more than a direct
install's (:func:`activation_for`).
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
#: A minor's entry for the Crossplane activation path.
ACTIVATION_KEY = "activation"
#: A version built from a pre-release tag: ``v1.38.0-beta.0``, ``-alpha.1``, ``-rc.0``.
_PRE_RELEASE = re.compile(r"-(alpha|beta|rc)\.?\d*")


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

    #: The oldest and newest calibrated minors (the range a requested minor may lie outside of).
    calibrated: tuple[str, str] = ("", "")

    @property
    def pre_release(self) -> bool:
        """The coefficients were measured on a pre-release (a beta or release candidate)."""
        return is_pre_release(str(self.data.get("kubernetes_version", "")))

    @property
    def outside_range(self) -> bool:
        """The requested minor is older than the oldest calibrated one or newer than the newest."""
        oldest, newest = self.calibrated
        if not oldest:
            return False
        wanted = parse_minor(self.requested)
        return wanted < parse_minor(oldest) or wanted > parse_minor(newest)

    @property
    def note(self) -> str:
        """Which coefficients are used, said plainly."""
        version = self.data.get("kubernetes_version", self.minor)
        calibrated = f"calibrated on {version}" + (", a pre-release: the release may differ" if self.pre_release
                                                   else "")
        if self.requested == self.minor:
            return f"model for {self.minor} ({calibrated})"
        if self.outside_range:
            oldest, newest = self.calibrated
            return (f"model for {self.minor} ({calibrated}): {self.requested} is outside the calibrated range "
                    f"{oldest}-{newest}, the nearest calibrated minor is used")
        return (f"model for {self.minor} ({calibrated}): {self.requested} has no coefficients "
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


def is_pre_release(version: str) -> bool:
    """``v1.38.0-beta.0`` is a pre-release; ``v1.37.2`` is not."""
    return bool(_PRE_RELEASE.search(version))


def _nearest(minors: list[str], wanted: tuple[int, int]) -> str:
    """The minor of ``minors`` nearest to ``wanted``; a tie goes to the newer one (the API server only gets
    leaner at CRD scale between releases, so the newer figure is the better guess for neither)."""
    name = f"{wanted[0]}.{wanted[1]}"
    if name in minors:
        return name
    return min(minors, key=lambda m: (abs(parse_minor(m)[1] - wanted[1]), -parse_minor(m)[1]))


def for_minor(requested: str, path: Path = COEFFICIENTS_FILE) -> Coefficients:
    """The coefficients of ``requested`` (``1.37``), or of the nearest calibrated minor."""
    wanted = parse_minor(requested)
    minors = _load(path)["minors"]
    name = _nearest(list(minors), wanted)
    ordered = sorted(minors, key=parse_minor)
    return Coefficients(f"{wanted[0]}.{wanted[1]}", name, dict(minors[name]), (ordered[0], ordered[-1]))


@dataclass(frozen=True)
class PathCoefficients:
    """The Crossplane activation path's coefficients of one minor (memory and the MRAP-to-Established time),
    and which minor was asked for."""

    requested: str
    minor: str
    data: dict[str, Any]

    @property
    def note(self) -> str:
        """Which path and calibration priced the figures, said plainly."""
        version = self.data.get("kubernetes_version", self.minor)
        crossplane = self.data.get("crossplane") or "Crossplane"
        text = f"through Crossplane activation (an MRAP activating MRDs; calibrated on {version} with {crossplane})"
        if self.requested != self.minor:
            text += f": {self.requested} has no activation calibration of its own, the nearest ({self.minor}) is used"
        return text

    def figure(self, name: str) -> dict[str, Any]:
        """One fitted figure of the path: ``terms`` and ``relative_rms``."""
        return dict((self.data.get("figures") or {}).get(name) or {})


def activation_minors(path: Path | None = None) -> list[str]:
    """The minors whose activation path is calibrated, oldest first (``path``: the data file's, by default)."""
    minors = _load(path or COEFFICIENTS_FILE)["minors"]
    return sorted((m for m, entry in minors.items() if entry.get(ACTIVATION_KEY)), key=parse_minor)


def activation_for(requested: str, path: Path | None = None) -> PathCoefficients | None:
    """The activation path's coefficients of ``requested``, or of the nearest minor that has them (None: no
    minor does)."""
    wanted = parse_minor(requested)
    minors = activation_minors(path)
    if not minors:
        return None
    name = _nearest(minors, wanted)
    entry = _load(path or COEFFICIENTS_FILE)["minors"][name][ACTIVATION_KEY]
    return PathCoefficients(f"{wanted[0]}.{wanted[1]}", name, dict(entry))
