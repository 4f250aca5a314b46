"""``--fail-if 'findings.critical>0'`` and ``... for 2m`` in the headless watch, on constructed samples."""

from __future__ import annotations

import io

import pytest

from crdscope.base.errors import ConfigError
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.responsiveness import ResponsivenessSample
from crdscope.session.core import SessionStore, WatchCore
from crdscope.session.failif import parse_threshold
from crdscope.session.headless import HeadlessSink


def health(at: float, mib: float) -> HealthSample:
    return HealthSample(timestamp=at, mib_per_crd=mib, r2=0.9, crds=100)


def test_for_duration_needs_the_condition_to_hold_that_long():
    threshold = parse_threshold("health.mib_per_crd>3 for 2m")
    assert threshold.for_seconds == 120 and threshold.limit == 3
    core = WatchCore(None, store=SessionStore())
    watch = HeadlessSink(core, [threshold], out=io.StringIO())
    core.take(health(0, 4.0))
    core.take(health(60, 2.0))  # one sample under: the wait starts over
    core.take(health(70, 4.0))
    core.take(health(180, 4.0))
    assert watch.crossing is None  # held 110 s so far
    core.take(health(190, 4.5))
    assert watch.crossing is not None and watch.crossing.value == 4.5


def test_findings_critical_ends_the_watch_when_a_critical_finding_opens():
    out = io.StringIO()
    core = WatchCore(None, store=SessionStore())
    watch = HeadlessSink(core, [parse_threshold("findings.critical>0")], out=out)
    core.take(ResponsivenessSample(timestamp=10, unanswered_seconds=1.0, oldest_request="GET /readyz",
                                   oldest_request_seconds=1.0))
    assert watch.crossing is None
    core.take(ResponsivenessSample(timestamp=16, unanswered_seconds=7.0, oldest_request="GET /readyz",
                                   oldest_request_seconds=7.0))
    assert watch.crossing is not None and watch.crossing.value == 1
    lines = out.getvalue().splitlines()
    assert any("critical finding opened: API server not answering" in line for line in lines)
    assert any("threshold crossed: findings.critical>0" in line for line in lines)


@pytest.mark.parametrize("text", ["findings.fatal>0", "health.mib_per_crd>3 for soon"])
def test_bad_findings_thresholds_are_config_errors(text):
    with pytest.raises(ConfigError):
        parse_threshold(text)
