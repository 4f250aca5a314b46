"""``crdscope rules``: Prometheus alerting rules that give the findings' verdicts without a screen.

The rules read the exporter's series (``crdscope watch --headless --serve-metrics``)
and, where they suffice, the API server's own ``/metrics``; thresholds come
from the same ``[thresholds]`` settings the findings use, so a fleet's
Prometheus and a person's terminal agree.  ``CrdscopeFinding`` fires for any
finding the exporter reports open (``crdscope_finding_open``), the catch-all
for findings no raw series can express (the local kubectl's discovery, say).
Each rule is declared beside the check it mirrors (``CheckSpec.rules`` in ``findings/``);
this module only renders them.
"""

from __future__ import annotations

from typing import Any

from crdscope.base.settings import Thresholds
from crdscope.findings.engine import DECLARED
from crdscope.findings.spec import AlertRule, PromQL

#: ``job`` label of the scrape of crdscope's exporter in the rules' selectors (overridable).
DEFAULT_JOB = "crdscope"


def alerting_rules(thresholds: Thresholds | None = None, job: str | None = DEFAULT_JOB,
                   apiserver_job: str | None = "apiserver") -> dict[str, Any]:
    """The rule file as a dict (``groups:``), ready for YAML: every check's declared rules, in the
    engine's order, then the catch-all for any open finding."""
    promql = PromQL(thresholds or Thresholds(), job, apiserver_job)
    declared = [rule for check in DECLARED for rule in check.rules(promql)]
    catch_all = AlertRule("CrdscopeFinding", "{{ $labels.severity }}",
                          f"{promql.crdscope('crdscope_finding_open')} == 1", "crdscope finding {{ $labels.finding }}",
                          "See `crdscope doctor` for its evidence and remedy.")
    return {"groups": [{"name": "crdscope", "rules": [_rule(rule) for rule in (*declared, catch_all)]}]}


def _rule(rule: AlertRule) -> dict[str, Any]:
    """One rule as Prometheus' rule file writes it."""
    written: dict[str, Any] = {"alert": rule.alert, "expr": rule.expr}
    if rule.keep_firing_for:
        written["keep_firing_for"] = rule.keep_firing_for
    written.update({"labels": {"severity": rule.severity},
                    "annotations": {"summary": rule.summary, "description": rule.description}})
    return written


def render_rules(thresholds: Thresholds | None = None, job: str | None = DEFAULT_JOB,
                 apiserver_job: str | None = "apiserver") -> str:
    """The rule file as YAML text (``promtool check rules`` reads it)."""
    import yaml

    return yaml.safe_dump(alerting_rules(thresholds, job, apiserver_job), sort_keys=False, width=200)
