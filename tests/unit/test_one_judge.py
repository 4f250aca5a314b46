"""One judge per fact (issue 46 item 1), held structurally: a threshold is read in ``findings/`` only,
by the check, :class:`Judgement` or :class:`EventRule` that declares it, so a reader finds every use
of a threshold from the declarations of the one list (``findings.engine.DECLARED``) and a threshold
changed in ``config.toml`` cannot miss a front end.  ``tests/tui/test_one_judge_front_ends.py``
holds the same behaviourally: the event line, the finding and the panel colour move together.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from pathlib import Path

from crdscope.base.samples import Sample
from crdscope.base.settings import Thresholds
from crdscope.findings.engine import DECLARED, event_rules
from crdscope.findings.spec import CheckSpec, Judgement
from crdscope.session.events import EventDetector

ROOT = Path(__file__).resolve().parents[2]
ROOMS = ("base", "cli", "connection", "toolchain", "probes", "loader", "lab", "session", "findings",
         "costmodel", "themes", "tui")
THRESHOLDS = frozenset(f.name for f in dataclasses.fields(Thresholds))
#: Files outside a check's module that read a threshold, each with why.
ALLOWED = {
    "base/settings.py": "defines the thresholds",
    "findings/spec.py": "PromQL's crash-loop window and quiet spell, which the crash-loop rules are written with",
}


def threshold_reads(path: Path) -> set[str]:
    """Names of :class:`Thresholds` fields read as an attribute (``x.discovery_seconds_warn``) in a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr in THRESHOLDS}


def product_files() -> list[Path]:
    return sorted(p for room in ROOMS for p in (ROOT / room).rglob("*.py"))


def declared_in(module: str) -> set[str]:
    """The thresholds the checks of one findings module declare (their judgements' and rules' too)."""
    declared: set[str] = set()
    for spec in DECLARED:
        if spec.function.__module__ == module:
            declared |= set(spec.thresholds)
    return declared


def test_no_threshold_is_read_outside_the_findings_declarations():
    outside = {}
    for path in product_files():
        relative = path.relative_to(ROOT).as_posix()
        if relative in ALLOWED or relative.startswith("findings/"):
            continue
        if reads := threshold_reads(path):
            outside[relative] = sorted(reads)
    assert not outside, f"thresholds judged outside findings/ (ask the declaration's Judgement instead): {outside}"


def test_each_findings_module_reads_only_the_thresholds_its_checks_declare():
    undeclared = {}
    for path in sorted((ROOT / "findings").glob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative in ALLOWED:
            continue
        module = f"crdscope.findings.{path.stem}"
        extra = threshold_reads(path) - declared_in(module)
        if extra:
            undeclared[relative] = sorted(extra)
    assert not undeclared, f"thresholds read but declared by no check of the module: {undeclared}"


def test_the_structural_scan_sees_a_threshold_read(tmp_path):
    """The scan is not blind: the panel's read before issue 46 is found, and so are a check's own."""
    panel = tmp_path / "discovery.py"
    panel.write_text("def draw(self):\n    return models_table(sample, self.cluster.thresholds.discovery_seconds_warn)\n")
    assert threshold_reads(panel) == {"discovery_seconds_warn"}
    assert threshold_reads(ROOT / "findings/crashloop.py") >= {"crashloop_window_seconds", "crashloop_quiet_seconds"}


def judgements_of(spec: CheckSpec) -> list[Judgement]:
    return [*spec.judgements, *(j for rule in spec.events for j in rule.judgements)]


def test_every_judgement_and_event_rule_judges_by_its_checks_declared_thresholds():
    for spec in DECLARED:
        for judgement in judgements_of(spec):
            assert judgement.threshold in THRESHOLDS, (spec.name, judgement)
            assert judgement.threshold in spec.thresholds, (
                f"{spec.name}: {judgement.figure} judges by {judgement.threshold}, not declared by the check")
        for rule in spec.events:
            module = vars(sys.modules[rule.holding.__module__])
            assert all(name in module for name in rule.constants), (spec.name, rule.began, rule.constants)
            assert not rule.finding or rule.finding in spec.kinds, (spec.name, rule.began, rule.finding)


def test_the_detector_runs_every_declared_rule_and_no_other():
    rules = event_rules()
    assert EventDetector().rules == rules
    kinds = [kind for rule in rules for kind in (rule.began, rule.ended)]
    assert len(kinds) == len(set(kinds)), f"an event kind declared twice: {kinds}"
    # Every rule judges samples of a real probe (the registry's sample classes).
    assert all(issubclass(rule.sample, Sample) and rule.sample is not Sample for rule in rules)
    assert {rule.began for rule in rules} >= {"discovery-over-budget", "openapi-backlog-growing", "latency-slo-breached",
                                              "throttling-began", "readyz-failing"}


def test_a_judgement_is_crossed_as_declared():
    over = Judgement("x", "openapi_backlog_warn")
    at = Judgement("x", "openapi_backlog_warn", inclusive=True)
    limits = Thresholds(openapi_backlog_warn=50)
    assert (over.crossed(50, limits), over.crossed(51, limits)) == (False, True)
    assert (at.crossed(49, limits), at.crossed(50, limits)) == (False, True)
    assert not at.crossed(None, limits)
