"""The fleet demo's story told from its clusters' figures: one narrator for the live demo and its replay.

:class:`Narrator` says, as health samples arrive, what is worth a look (the capped lab's memory near
its cap, its OOM kill and the supervisor's restart, with the other lab's memory at that moment), and
at the end each cluster's open findings, then each finding that opens after.  Every figure it states
is read with :func:`tui.fleet_figures.figures_of` and written as the compare screen writes it (the
same ``size``, ``number`` and MiB per CRD), so a line says what the screen shows when it is said.
The live demo (:mod:`tui.fleet_demo`) and its replay (:mod:`tui.fleet_replay`) both drive it: the
replay's lines are read from the replayed samples, not copied from the recording.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from crdscope.findings.model import Finding
from crdscope.session.notes import CastMember, NoteKind

from .fleet_figures import ClusterFigures, figures_of
from .format import number, size
from .sessions import ClusterSession

#: Memory over this fraction of the cap is a stage worth a line: the kill is near.
NEAR_CAP = 0.8

#: ``say(line, severity, kind)``: one line of the story (``kind`` as :mod:`session.notes` names them).
Say = Callable[[str, str, NoteKind], None]


@dataclass
class DemoLab:
    """One lab of the demo as the story names it (live: :class:`tui.fleet_demo.LabInstall` holds one)."""

    name: str
    kubernetes: str
    memory_limit: int
    #: True once installed, False when it stopped short, None while it runs (or before it starts).
    result: bool | None = None

    @property
    def label(self) -> str:
        """``demo-126 (1.26, capped at 4.5GiB)``: the lab as the narration names it."""
        cap = f", capped at {size(self.memory_limit)}" if self.memory_limit else ""
        return f"{self.name} ({self.kubernetes}{cap})"

    def cast(self, context: str) -> CastMember:
        """The lab as a recording's note names it (``context``: its session's, which names its recording)."""
        return CastMember(self.name, context, self.kubernetes, self.memory_limit)


def mib_per_crd(value: float) -> str:
    """MiB per CRD as the compare screen's column writes it (two decimals)."""
    return f"{value:.2f}"


def holds(name: str, figures: ClusterFigures) -> str:
    """``demo-137 holds 612 CRDs in 2.1GiB, 2.83 MiB per CRD``: a lab's memory, as its row shows it."""
    rss = size(figures.rss_bytes) if figures.rss_bytes else "?"
    per = f", {mib_per_crd(figures.mib_per_crd)} MiB per CRD" if figures.mib_per_crd else ""
    return f"{name} holds {number(figures.crds or 0)} CRDs in {rss}{per}"


def findings_line(name: str, findings: list[Finding]) -> str:
    """One lab's open findings in one line (most severe first)."""
    if not findings:
        return f"findings of {name}: none open"
    listed = "; ".join(f"{f.severity.value}: {f.title}" for f in findings[:4])
    more = f" (+{len(findings) - 4} more: f lists them)" if len(findings) > 4 else ""
    return f"findings of {name} ({len(findings)}): {listed}{more}"


def severity_of(findings: list[Finding]) -> str:
    """The notification's severity for these findings (the worst of them)."""
    worst = max((f.severity.rank for f in findings), default=0)
    return {0: "information", 1: "information", 2: "warning"}.get(worst, "error")


def oom_killed(session: ClusterSession) -> bool:
    """Whether the lab counted an OOM kill of the API server (its memory group's counter)."""
    from crdscope.base.samples.health import HealthSample

    samples = (session.store.latest_of(HealthSample), session.store.last_good_of(HealthSample))
    return any(sample is not None and (sample.oom_kills or 0) > 0 for sample in samples)


class Narrator:
    """The figures' part of the story over the demo's labs, each beside its session (capped first)."""

    def __init__(self, pairs: list[tuple[DemoLab, ClusterSession]], say: Say) -> None:
        self.pairs = pairs
        self.say = say
        #: True once the story's end was said (then only findings that open are news).
        self.ended = False
        self._near_cap_said = False
        self._restarts_said = 0
        self._seen_findings: set[tuple[str, str]] = set()

    @property
    def capped(self) -> list[tuple[DemoLab, ClusterSession]]:
        return [(lab, session) for lab, session in self.pairs if lab.memory_limit]

    def opening(self, provider: str, how: str, fallback: str) -> None:
        """The first lines: who is compared, what to watch, what goes in and how."""
        labs = [lab for lab, _ in self.pairs]
        self.say(f"{labs[0].label} beside {labs[1].label}: watch RSS, MiB/CRD, headroom and restarts in the "
                 "table, and RSS against CRDs on the chart", "information", "story")
        self.say(f"installing {provider} into both {how}", "information", "story")
        if fallback:
            self.say(fallback, "warning", "story")

    def follow(self) -> None:
        """On each health sample: the capped lab near its cap, its kill (once each); after the end, a
        finding that opens."""
        for lab, session in self.capped:
            figures = figures_of(session)
            if (not self._near_cap_said and figures.rss_bytes
                    and figures.rss_bytes >= NEAR_CAP * lab.memory_limit):
                self._near_cap_said = True
                self.say(f"{lab.name} at {figures.rss_bytes / lab.memory_limit:.0%} of its cap with "
                         f"{number(figures.crds or 0)} CRDs; " + self.others(session), "warning", "figures")
            restarts = figures.restarts or 0
            if restarts > self._restarts_said:
                first = self._restarts_said == 0
                self._restarts_said = restarts
                if first:
                    killed = "OOM-killed by its cgroup" if oom_killed(session) else "killed"
                    self.say(f"{lab.name} was {killed} at its {size(lab.memory_limit)} cap and restarted by the "
                             "lab's supervisor (it reloads every CRD and may be killed again); "
                             + self.others(session), "error", "figures")
        if self.ended:
            self.new_findings()

    def others(self, capped: ClusterSession) -> str:
        """What every other lab holds now (the comparison the kill is news against)."""
        return "; ".join(holds(lab.name, figures_of(session)) for lab, session in self.pairs if session is not capped)

    def end(self, line: str) -> None:
        """The story's end (``line``, live: which installs ended), then each cluster's open findings."""
        self.ended = True
        self.say(line, "information", "end")
        for lab, session in self.pairs:
            findings = session.core.open_findings()
            self._seen_findings |= {(lab.name, f.id) for f in findings}
            self.say(findings_line(lab.name, findings), severity_of(findings), "figures")

    def new_findings(self) -> None:
        """After the end, a finding that opens (a crash loop confirmed) is one more line."""
        for lab, session in self.pairs:
            for finding in session.core.open_findings():
                if (lab.name, finding.id) not in self._seen_findings:
                    self._seen_findings.add((lab.name, finding.id))
                    self.say(f"new finding of {lab.name}: {finding.severity.value}: {finding.title}",
                             severity_of([finding]), "figures")
