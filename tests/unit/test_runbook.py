"""The runbook the alerting rules point at (``docs/runbook.md``) and the finding kinds it is indexed by.

Every declared check's finding kinds have a section (what it means, how to confirm, what to do);
every rule's ``runbook_url`` anchor is a section of the page, whose text names the alert; the kinds a
check declares are the ones its module opens (read from the source) and the ones it opened on
samples that trip it.
"""

from __future__ import annotations

import ast
import re
import sys

import pytest

from crdscope.findings.engine import DECLARED, finding_kinds
from crdscope.findings.spec import CheckSpec, PromQL
from crdscope.session.rules import alerting_rules
from tests.conftest import ROOT
from tests.unit.test_findings_declarations import filled_stores, ids, observations

RUNBOOK = ROOT / "docs" / "runbook.md"


def anchor(heading: str) -> str:
    """The anchor a Markdown renderer (GitHub's) gives a heading: lower case, punctuation but ``-``
    and ``_`` dropped, spaces as ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def sections() -> dict[str, str]:
    """Anchor -> the section's text (to the next heading of its level)."""
    found: dict[str, str] = {}
    current = None
    for line in RUNBOOK.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            current = anchor(line[3:])
            assert current not in found, f"two sections for {current}"
            found[current] = ""
        elif current is not None:
            found[current] += line + "\n"
    return found


def test_every_finding_kind_has_a_section_saying_what_it_means_how_to_confirm_and_what_to_do():
    pages = sections()
    kinds = finding_kinds()
    assert kinds and set(pages) == set(kinds), (set(kinds) - set(pages), set(pages) - set(kinds))
    for kind, text in pages.items():
        for part in ("**What it means.**", "**How to confirm.**", "**What to do.**"):
            assert part in text, f"{kind}: no {part}"


def rules() -> list[dict]:
    return alerting_rules(runbook_url="https://runbooks.example/crdscope.md")["groups"][0]["rules"]


def test_every_rule_links_to_a_section_that_names_its_alert():
    pages = sections()
    for rule in rules():
        url = rule["annotations"]["runbook_url"]
        base, _, target = url.partition("#")
        assert base == "https://runbooks.example/crdscope.md", url
        if rule["alert"] == "CrdscopeFinding":
            # Templated by Prometheus with the open finding's kind: every kind has its section (above).
            assert target == "{{ $labels.kind }}", url
            continue
        assert target in pages, f"{rule['alert']}: no section #{target}"
        assert f"`{rule['alert']}`" in pages[target], f"section #{target} does not name {rule['alert']}"


def test_every_alert_is_named_in_the_runbook_once():
    text = RUNBOOK.read_text(encoding="utf-8")
    for rule in rules():
        if rule["alert"] != "CrdscopeFinding":
            assert text.count(f"`{rule['alert']}`") == 1, rule["alert"]


def opened_kinds(module_name: str) -> set[str]:
    """The kinds of every ``Finding(...)`` a module builds: its first argument, a constant of the
    module or a string (an f-string's text up to ``:``)."""
    module = sys.modules[module_name]
    tree = ast.parse(open(module.__file__, encoding="utf-8").read())
    kinds = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Finding":
            first = node.args[0]
            if isinstance(first, ast.JoinedStr):
                first = first.values[0]
                if isinstance(first, ast.FormattedValue):
                    first = first.value
            if isinstance(first, ast.Name):
                kinds.add(str(vars(module)[first.id]).split(":", 1)[0])
            elif isinstance(first, ast.Constant):
                kinds.add(str(first.value).split(":", 1)[0])
            else:
                raise AssertionError(f"{module_name}: a Finding whose id this test cannot read: {ast.dump(first)}")
    return kinds


def test_the_kinds_declared_are_the_ones_each_module_opens():
    modules = {check.function.__module__ for check in DECLARED}
    for module_name in modules:
        declared = {kind for check in DECLARED if check.function.__module__ == module_name for kind in check.kinds}
        assert opened_kinds(module_name) == declared, module_name


@pytest.mark.parametrize("check", DECLARED, ids=ids)
def test_a_check_opens_only_kinds_it_declares_and_its_rules_name_one(check: CheckSpec):
    assert check.kinds, f"{check.name} declares no finding kind"
    for store in filled_stores():
        for finding in check(observations(store)):
            assert finding.kind in check.kinds, (check.name, finding.id)
    for rule in check.rules(PromQL()):
        assert check.kind_of(rule) in check.kinds, (check.name, rule.alert)
