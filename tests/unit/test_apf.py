"""APF figures between two scrapes, checked against hand computations."""

from __future__ import annotations

import dataclasses

import pytest

from crdscope.probes.apf import APF_FAMILIES, priority_levels
from crdscope.connection.metrics import parse_text

OLDER = """\
apiserver_flowcontrol_nominal_limit_seats{priority_level="a"} 10
apiserver_flowcontrol_current_limit_seats{priority_level="a"} 12
apiserver_flowcontrol_nominal_limit_seats{priority_level="gone"} 3
apiserver_flowcontrol_rejected_requests_total{flow_schema="f",priority_level="a",reason="queue-full"} 5
apiserver_flowcontrol_dispatched_requests_total{flow_schema="f",priority_level="a"} 100
apiserver_flowcontrol_dispatched_requests_total{flow_schema="g",priority_level="a"} 7
apiserver_flowcontrol_request_wait_duration_seconds_bucket{execute="true",flow_schema="f",priority_level="a",le="0.1"} 50
apiserver_flowcontrol_request_wait_duration_seconds_bucket{execute="true",flow_schema="f",priority_level="a",le="1"} 90
apiserver_flowcontrol_request_wait_duration_seconds_bucket{execute="true",flow_schema="f",priority_level="a",le="+Inf"} 100
"""

NEWER = """\
apiserver_flowcontrol_nominal_limit_seats{priority_level="a"} 10
apiserver_flowcontrol_current_limit_seats{priority_level="a"} 14
apiserver_flowcontrol_nominal_limit_seats{priority_level="gone"} 3
apiserver_flowcontrol_current_inqueue_requests{flow_schema="f",priority_level="a"} 4
apiserver_flowcontrol_current_executing_seats{flow_schema="f",priority_level="a"} 2
apiserver_flowcontrol_current_executing_requests{priority_level="a"} 2
apiserver_flowcontrol_rejected_requests_total{flow_schema="f",priority_level="a",reason="queue-full"} 8
apiserver_flowcontrol_rejected_requests_total{flow_schema="f",priority_level="a",reason="time-out"} 2
apiserver_flowcontrol_dispatched_requests_total{flow_schema="f",priority_level="a"} 130
apiserver_flowcontrol_dispatched_requests_total{flow_schema="g",priority_level="a"} 7
apiserver_flowcontrol_request_wait_duration_seconds_bucket{execute="true",flow_schema="f",priority_level="a",le="0.1"} 50
apiserver_flowcontrol_request_wait_duration_seconds_bucket{execute="true",flow_schema="f",priority_level="a",le="1"} 140
apiserver_flowcontrol_request_wait_duration_seconds_bucket{execute="true",flow_schema="f",priority_level="a",le="+Inf"} 150
"""


def scrape(text: str, at: float):
    return dataclasses.replace(parse_text(text, APF_FAMILIES), timestamp=at)


def test_counts_and_rates_between_two_scrapes():
    levels, schemas = priority_levels(scrape(NEWER, 110.0), scrape(OLDER, 100.0), {"a": "Queue"})
    (a,) = levels  # "gone" is idle and no longer configured
    assert a.name == "a" and a.limit_response == "Queue"
    assert (a.inqueue, a.executing_seats, a.executing_requests) == (4, 2, 2)
    assert (a.nominal_limit_seats, a.limit_seats) == (10, 14)
    # rejected: queue-full 8 - 5, time-out 2 - 0 (the series appeared in between)
    assert a.rejected_by_reason == {"queue-full": 3, "time-out": 2}
    assert (a.rejected, a.rejected_total) == (5, 10)
    assert a.rejected_per_s == pytest.approx(0.5)
    assert a.dispatched == 30 and a.dispatched_per_s == pytest.approx(3.0)
    # waits in between: 0 <= 0.1 s, 50 in (0.1, 1], 0 above; rank 0.99 * 50 = 49.5
    assert a.wait_p99_seconds == pytest.approx(0.1 + 0.9 * 49.5 / 50)
    # only the flow schema that did something is listed
    (f,) = schemas
    assert (f.name, f.priority_level, f.rejected, f.dispatched, f.inqueue) == ("f", "a", 5, 30, 4)
    assert f.dispatched_per_s == pytest.approx(3.0)


def test_first_scrape_has_current_values_but_no_counts():
    levels, _ = priority_levels(scrape(NEWER, 110.0), None, {})
    assert [level.name for level in levels] == ["a", "gone"]  # configuration unknown: keep every level
    a = levels[0]
    assert (a.inqueue, a.limit_seats, a.rejected_total) == (4, 14, 10)
    assert a.rejected is None and a.rejected_per_s is None and a.wait_p99_seconds is None


def test_counter_reset_counts_from_zero():
    restarted = NEWER.replace('flow_schema="f",priority_level="a"} 130', 'flow_schema="f",priority_level="a"} 20')
    (a,), _ = priority_levels(scrape(restarted, 110.0), scrape(OLDER, 100.0), {"a": "Queue"})
    assert a.dispatched == 20 + 0  # f restarted at 20; g unchanged


def test_no_waits_in_between_means_no_quantile():
    (a,), _ = priority_levels(scrape(OLDER, 110.0), scrape(OLDER, 100.0), {"a": "Queue"})
    assert a.wait_p99_seconds is None
    assert a.rejected == 0 and a.rejected_per_s == 0.0
