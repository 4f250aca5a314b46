"""``crdscope rules``: Prometheus alerting rules that give the findings' verdicts without a screen.

The rules read the exporter's series (``crdscope watch --headless --serve-metrics``)
and, where they suffice, the API server's own ``/metrics``; thresholds come
from the same ``[thresholds]`` settings the findings use, so a fleet's
Prometheus and a person's terminal agree.  ``CrdscopeFinding`` fires for any
finding the exporter reports open and not accepted (``crdscope_finding_open{accepted="false"}``),
the catch-all for findings no raw series can express (the local kubectl's discovery, say).
Each rule is declared beside the check it mirrors (``CheckSpec.rules`` in ``findings/``);
this module only renders them, adding to each:

* ``runbook_url``: the runbook's section of the finding kind it stands for (``[rules] runbook_url``
  or ``--runbook-url``, then ``#<kind>``; ``docs/runbook.md`` has one section per kind);
* ``unless on(cluster) crdscope_finding_accepted_until_seconds{kind,finding}``: a cluster whose team
  accepted the whole kind (``[[silence]]`` with ``finding = "<kind>"``) is not alerted on, until the
  acceptance lapses and the exporter drops the series.  An acceptance of one finding id
  (``latency-slo:LIST cluster``) silences that finding's ``CrdscopeFinding`` only: the raw series
  of a kind's rule do not say which id they are.  Rules over the API server's own scrape are
  silenced where that scrape carries the same ``cluster`` label as crdscope's exporter.
"""

from __future__ import annotations

from typing import Any

from crdscope.base.settings import RulesSettings, Thresholds
from crdscope.findings.engine import DECLARED
from crdscope.findings.spec import AlertRule, PromQL

#: ``job`` label of the scrape of crdscope's exporter in the rules' selectors (overridable).
DEFAULT_JOB = "crdscope"
#: The runbook page the project ships (``docs/runbook.md``), unless configured.
DEFAULT_RUNBOOK_URL = RulesSettings().runbook_url


def alerting_rules(thresholds: Thresholds | None = None, job: str | None = DEFAULT_JOB,
                   apiserver_job: str | None = "apiserver", runbook_url: str = DEFAULT_RUNBOOK_URL) -> dict[str, Any]:
    """The rule file as a dict (``groups:``), ready for YAML: every check's declared rules, in the
    engine's order, then the catch-all for any open finding that is not accepted."""
    promql = PromQL(thresholds or Thresholds(), job, apiserver_job)
    base = runbook_url.split("#", 1)[0]
    written = []
    for check in DECLARED:
        for rule in check.rules(promql):
            kind = check.kind_of(rule)
            written.append(_rule(rule, unless_accepted(rule.expr, kind, promql), f"{base}#{kind}"))
    open_finding = promql.crdscope("crdscope_finding_open", 'accepted="false"')
    catch_all = AlertRule("CrdscopeFinding", "{{ $labels.severity }}", f"{open_finding} == 1",
                          "crdscope finding {{ $labels.finding }}",
                          "See `crdscope doctor` for its evidence and remedy.")
    written.append(_rule(catch_all, catch_all.expr, base + "#{{ $labels.kind }}"))
    return {"groups": [{"name": "crdscope", "rules": written}]}


def unless_accepted(expr: str, kind: str, promql: PromQL) -> str:
    """``expr`` except for the clusters whose team accepted every finding of ``kind``."""
    accepted = promql.crdscope("crdscope_finding_accepted_until_seconds", f'kind="{kind}",finding="{kind}"')
    return f"({expr}) unless on(cluster) {accepted}"


def _rule(rule: AlertRule, expr: str, runbook_url: str) -> dict[str, Any]:
    """One rule as Prometheus' rule file writes it."""
    written: dict[str, Any] = {"alert": rule.alert, "expr": expr}
    if rule.keep_firing_for:
        written["keep_firing_for"] = rule.keep_firing_for
    written.update({"labels": {"severity": rule.severity},
                    "annotations": {"summary": rule.summary, "description": rule.description,
                                    "runbook_url": runbook_url}})
    return written


def render_rules(thresholds: Thresholds | None = None, job: str | None = DEFAULT_JOB,
                 apiserver_job: str | None = "apiserver", runbook_url: str = DEFAULT_RUNBOOK_URL) -> str:
    """The rule file as YAML text (``promtool check rules`` reads it)."""
    import yaml

    return yaml.safe_dump(alerting_rules(thresholds, job, apiserver_job, runbook_url), sort_keys=False, width=200)
