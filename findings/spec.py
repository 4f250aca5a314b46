"""What each check declares: the samples it reads, the limits it judges by, the alerting rules it becomes.

One :class:`CheckSpec` per check, written beside the check, replaces the tables that used to be
kept in step by position (the checks, what ``crdscope doctor`` lists as checked, the rules of
``crdscope rules``).  ``doctor`` counts a check as done when every probe it declares delivered
a good sample; ``crdscope rules`` renders every declared :class:`AlertRule`; a test holds the
declared threshold names to :class:`~crdscope.base.settings.Thresholds` and the declared sample
classes to the probe registry.

One judge per fact: a figure that a finding, an event line and a panel colour all judge is judged
by one :class:`Judgement` (a threshold's verdict on it), declared on its check; the transitions the
events log reports that are no finding are :class:`EventRule` declarations on the check of their
subject (``CheckSpec.events``), and the events detector (``session.events``) only runs them.  A
threshold is read in ``findings/`` only (a test holds it): ``config.toml`` moves every front end.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Collection, Mapping
from typing import Any, Generic, TypeVar

from crdscope.base.samples import Sample
from crdscope.base.settings import Thresholds

from .model import Finding, Severity
from .observations import Observations

Check = Callable[[Observations], list[Finding]]
S = TypeVar("S", bound=Sample)


@dataclasses.dataclass(frozen=True)
class Judgement:
    """One figure judged against one threshold, in one place: the check that opens the finding, the
    event line and the panel's colour of that figure all ask it, so a threshold changed in
    ``config.toml`` moves them together."""

    #: What is judged, as a person reads it ("a client's cold discovery, seconds").
    figure: str
    #: The :class:`Thresholds` field it is judged by.
    threshold: str
    #: How bad crossing it is.
    severity: Severity = Severity.WARNING
    #: Crossed at the threshold itself (``>=``), not only above it (``>``).
    inclusive: bool = False

    def limit(self, thresholds: Thresholds) -> float:
        """The threshold's value in ``thresholds``."""
        return float(getattr(thresholds, self.threshold))

    def crossed(self, value: float | None, thresholds: Thresholds) -> bool:
        """True when ``value`` (None: not observed, never) is past the threshold."""
        if value is None:
            return False
        limit = self.limit(thresholds)
        return value >= limit if self.inclusive else value > limit


@dataclasses.dataclass(frozen=True)
class Said:
    """What an event rule finds holding: how bad, and the events log's line as it begins."""

    severity: Severity
    text: str


@dataclasses.dataclass(frozen=True)
class Judging(Generic[S]):
    """What an :class:`EventRule` judges one sample with."""

    sample: S
    #: The samples of its probe the rule judged before this one, oldest first (the last few).
    before: tuple[S, ...]
    thresholds: Thresholds
    #: The open findings after this sample, by id: a rule that follows a finding reads its state.
    findings: Mapping[str, Finding]
    #: What held after the previous sample, by key (a rule that holds until a figure drains reads it) ...
    held: Mapping[str, Said]
    #: ... and since when each of those held.
    since: Mapping[str, float]


#: What holds now, by key (several may at once: one per priority level, per verb); None: the sample
#: does not tell (a figure not observed), and what held stands.
Holding = Mapping[str, Said] | None


@dataclasses.dataclass(frozen=True)
class EventRule(Generic[S]):
    """A transition the events log reports: something begins to hold (``began``) and stops (``ended``).

    Declared on the check of its subject (``CheckSpec.events``); the events detector runs every
    declared rule on each sample of its class and reports each key of :attr:`holding` once as it
    appears and once as it goes, never once per sample.  A rule judges a figure with the
    :class:`Judgement` s it declares, or follows a finding's state (``finding``): then the finding is
    the one judge and the event only says when it opened and closed.
    """

    #: The samples it judges (good ones only: a failed sample's figures are defaults).
    sample: type[S]
    #: The event's kind when a key begins to hold, and when it stops.
    began: str
    ended: str
    #: What holds after this sample.
    holding: Callable[[Judging[S]], Holding]
    #: The line when ``key`` stops holding (the event is info).
    ended_text: Callable[[str, Judging[S]], str]
    #: The judgements it judges figures by (their thresholds are its check's).
    judgements: tuple[Judgement, ...] = ()
    #: The finding kind whose state it follows ("": its own figures).
    finding: str = ""
    #: Names of the constants of its module it judges by.
    constants: tuple[str, ...] = ()

    @property
    def thresholds(self) -> tuple[str, ...]:
        """The :class:`Thresholds` fields it judges by."""
        return tuple(judgement.threshold for judgement in self.judgements)


@dataclasses.dataclass(frozen=True)
class AlertRule:
    """One Prometheus alerting rule: the verdict of a check, read from the exporter's series."""

    alert: str
    severity: str
    expr: str
    summary: str
    description: str
    #: Prometheus 2.42+: hold the alert through a quiet spell, as the finding does (None: not held).
    keep_firing_for: str | None = None
    #: The finding kind it stands for (its runbook section; an acceptance of that kind silences it):
    #: "" for the check's only kind.
    finding: str = ""


@dataclasses.dataclass(frozen=True)
class PromQL:
    """What a rule's expression is written with: the thresholds and the scrape jobs' selectors."""

    thresholds: Thresholds = dataclasses.field(default_factory=Thresholds)
    #: ``job`` label of the scrape of crdscope's exporter (None: no job selector).
    job: str | None = "crdscope"
    #: ``job`` label of the scrape of the API server's own /metrics (None: no job selector).
    apiserver_job: str | None = "apiserver"

    def crdscope(self, name: str, extra: str = "") -> str:
        """A series of crdscope's exporter, ``name{job="crdscope",extra}``."""
        return _selector(name, f'job="{self.job}"' if self.job else "", extra)

    def apiserver(self, name: str, extra: str = "") -> str:
        """A series of the API server's own /metrics, ``name{job="apiserver",extra}``."""
        return _selector(name, f'job="{self.apiserver_job}"' if self.apiserver_job else "", extra)

    @property
    def window(self) -> str:
        """The crash-loop window as a PromQL duration (``600s``)."""
        return f"{self.thresholds.crashloop_window_seconds:g}s"

    @property
    def quiet(self) -> str:
        """The crash-loop quiet spell as a PromQL duration (``300s``)."""
        return f"{self.thresholds.crashloop_quiet_seconds:g}s"

    def grew(self, series: str) -> str:
        """A counter's rise within :attr:`window`, exactly: ``increase()`` extrapolates to the
        window's edges and would read 3 restarts as 2.9 or 3.4."""
        return f"(max_over_time({series}[{self.window}]) - min_over_time({series}[{self.window}]))"


def _selector(name: str, *labels: str) -> str:
    joined = ",".join(label for label in labels if label)
    return f"{name}{{{joined}}}" if joined else name


def no_rules(_promql: PromQL) -> tuple[AlertRule, ...]:
    """For a check no series can express (the catch-all ``CrdscopeFinding`` rule still covers it)."""
    return ()


@dataclasses.dataclass(frozen=True)
class CheckSpec:
    """One check and what it uses.  Calling the spec runs the check, so it is itself a check."""

    function: Check
    #: What ``crdscope doctor`` lists under "Checked" when this check could judge.
    what_it_checks: str
    #: Sample classes whose good samples the check needs to judge at all.
    probes: tuple[type[Sample], ...]
    #: Names of the :class:`Thresholds` fields it judges by.
    thresholds: tuple[str, ...] = ()
    #: Names of the constants of its own module it judges by (limits not worth a setting).
    constants: tuple[str, ...] = ()
    #: Sample classes it reads when present (a fallback view, a refinement), not needed to judge.
    also_reads: tuple[type[Sample], ...] = ()
    #: The alerting rules it becomes in Prometheus, written with the given thresholds and jobs.
    rules: Callable[[PromQL], tuple[AlertRule, ...]] = no_rules
    #: The finding kinds it can open (a finding's id before any ``:``): what ``[[silence]]`` entries
    #: may name and what the runbook (``docs/runbook.md``) has a section for.
    kinds: tuple[str, ...] = ()
    #: The judgements of single figures it shares with the event lines and panels (their thresholds
    #: are among :attr:`thresholds`).
    judgements: tuple[Judgement, ...] = ()
    #: The event lines of its subject (the events log, the headless watch): rules, not findings.
    events: tuple[EventRule[Any], ...] = ()

    def __call__(self, obs: Observations) -> list[Finding]:
        """Run the check."""
        return self.function(obs)

    @property
    def name(self) -> str:
        """The check function's name (``not_answering``)."""
        return self.function.__name__

    def kind_of(self, rule: AlertRule) -> str:
        """The finding kind ``rule`` stands for: its own, else the check's only one."""
        if rule.finding:
            return rule.finding
        if len(self.kinds) != 1:
            raise ValueError(f"{self.name}: rule {rule.alert} must name its finding (the check opens {self.kinds})")
        return self.kinds[0]

    def missing(self, probes_seen: Collection[str]) -> list[str]:
        """The declared probes that delivered no good sample (empty: the check could judge)."""
        return [kind.probe for kind in self.probes if kind.probe not in probes_seen]

    def limits(self, thresholds: Thresholds) -> dict[str, object]:
        """Every declared threshold and constant with its value (thresholds as given)."""
        module = vars(sys.modules[self.function.__module__])
        return {**{name: getattr(thresholds, name) for name in self.thresholds},
                **{name: module[name] for name in self.constants}}
