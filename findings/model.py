"""What a finding is: a verdict a person can act on, with the figures that support it.

A :class:`Finding` is frozen: the engine builds a fresh one from the latest
samples every time it evaluates, keyed by :attr:`Finding.id`; opening and
closing are transitions (:class:`FindingChange`), reported once each.  A finding an on-call
team accepted (``[[silence]]`` in config, :mod:`base.silences`) carries its acceptance: it is
still judged and shown, but it does not page (:attr:`Finding.pages`) until the acceptance lapses.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from typing import Any

from crdscope.base.silences import Silence


class Severity(enum.Enum):
    """How bad: info (worth knowing), warning (act soon), critical (act now)."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        """0 info, 1 warning, 2 critical (also ``crdscope doctor``'s exit code)."""
        return _RANKS[self]


_RANKS = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


@dataclasses.dataclass(frozen=True)
class Finding:
    """One verdict: what, how bad, the evidence (figures and where they came from), why, what to do.

    ``id`` is stable across evaluations ("apiserver-not-answering", "latency-slo:LIST cluster")
    so that the same problem stays one finding while its figures change; ``since`` is the
    timestamp of the sample that opened it.
    """

    id: str
    severity: Severity
    title: str
    evidence: tuple[str, ...]
    cause: str
    remedy: str
    since: float = 0.0
    #: The acceptance that holds it back from paging (None: it pages).
    accepted: Silence | None = None

    @property
    def pages(self) -> bool:
        """True unless accepted: what exit codes, ``--fail-if``, the critical status and alerts count."""
        return self.accepted is None

    @property
    def accepted_note(self) -> str:
        """``accepted until 2026-07-01T00:00:00Z: why`` (empty when it pages)."""
        if self.accepted is None:
            return ""
        return f"accepted until {self.accepted.until_text}: {self.accepted.why}"

    @property
    def kind(self) -> str:
        """The finding's kind: its id before any ``:`` (one alert rule per kind)."""
        return self.id.split(":", 1)[0]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (recordings, ``doctor --json``)."""
        data = dataclasses.asdict(self)
        data["severity"] = self.severity.value
        data["evidence"] = list(self.evidence)
        data["accepted"] = self.accepted.to_json() if self.accepted is not None else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        """Inverse of :meth:`to_json`; unknown keys are ignored, a bad severity reads as info."""
        try:
            severity = Severity(str(data.get("severity", "info")))
        except ValueError:
            severity = Severity.INFO
        return cls(id=str(data.get("id", "")), severity=severity, title=str(data.get("title", "")),
                   evidence=tuple(str(e) for e in data.get("evidence") or ()), cause=str(data.get("cause", "")),
                   remedy=str(data.get("remedy", "")), since=float(data.get("since") or 0.0),
                   accepted=Silence.from_json(data.get("accepted")))


OPENED, CLOSED, CHANGED = "opened", "closed", "changed"
#: An open finding became accepted, or its acceptance lapsed (it pages from then on).
ACCEPTED, EXPIRED = "accepted", "expired"


@dataclasses.dataclass(frozen=True)
class FindingChange:
    """A finding opened, closed, or changed severity, at ``timestamp``."""

    timestamp: float
    change: str
    finding: Finding

    @property
    def duration_seconds(self) -> float:
        """How long the finding had been open (for a close or a change)."""
        return max(0.0, self.timestamp - self.finding.since)

    def line(self) -> str:
        """``HH:MM:SS critical finding opened: title`` as the headless watch prints it; an accepted
        finding says so (``finding opened (accepted until ...: why): title``), and a lapsed acceptance
        ``finding's acceptance expired, it pages: title``."""
        clock = time.strftime("%H:%M:%S", time.localtime(self.timestamp))
        severity = self.finding.severity.value
        note = f" ({self.finding.accepted_note})" if self.finding.accepted is not None else ""
        if self.change == CLOSED:
            return (f"{clock} {severity:<8} finding closed after {format_duration(self.duration_seconds)}{note}: "
                    f"{self.finding.title}")
        if self.change == EXPIRED:
            return f"{clock} {severity:<8} finding's acceptance expired, it pages: {self.finding.title}"
        return f"{clock} {severity:<8} finding {self.change}{note}: {self.finding.title}"

    def to_json(self) -> dict[str, Any]:
        """The recorder's finding record."""
        return {"timestamp": self.timestamp, "change": self.change, "finding": self.finding.to_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FindingChange:
        """Inverse of :meth:`to_json`."""
        return cls(timestamp=float(data.get("timestamp") or 0.0), change=str(data.get("change", OPENED)),
                   finding=Finding.from_json(data.get("finding") or {}))


def most_severe_first(findings: list[Finding] | tuple[Finding, ...]) -> list[Finding]:
    """Findings that page before accepted ones; within each, critical first, then warnings, then
    info; oldest first within a severity."""
    return sorted(findings, key=lambda f: (not f.pages, -f.severity.rank, f.since, f.id))


def paging(findings: list[Finding] | tuple[Finding, ...]) -> list[Finding]:
    """The findings that page (accepted ones left out), in their order."""
    return [f for f in findings if f.pages]


def worst_rank(findings: list[Finding] | tuple[Finding, ...]) -> int:
    """The worst severity's rank among the findings that page (0 when none does): an exit code."""
    return max((f.severity.rank for f in findings if f.pages), default=0)


def format_duration(seconds: float) -> str:
    """``4.2 s``, ``3m05s``, ``1h02m`` (as event lines print durations)."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
