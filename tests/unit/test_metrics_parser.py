"""The streaming /metrics parser against prometheus_client's, and histogram maths."""

from __future__ import annotations

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from crdscope.connection.metrics import (
    MetricsParser, delta_buckets, histogram_quantile, merge_buckets, parse_text, buckets,
)

EXPOSITION = r'''# HELP apiserver_flowcontrol_current_inqueue_requests [BETA] Number of requests
# TYPE apiserver_flowcontrol_current_inqueue_requests gauge
apiserver_flowcontrol_current_inqueue_requests{flow_schema="global-default",priority_level="global-default"} 3
apiserver_flowcontrol_current_inqueue_requests{flow_schema="exempt",priority_level="exempt"} 0
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 1.23456789e+08
# TYPE weird gauge
weird{path="/a,b}c",msg="say \"hi\"\nthere",back="\\"} +Inf
# TYPE req_seconds histogram
req_seconds_bucket{verb="GET",le="0.1"} 5
req_seconds_bucket{verb="GET",le="0.5"} 8
req_seconds_bucket{verb="GET",le="1"} 9
req_seconds_bucket{verb="GET",le="+Inf"} 10
req_seconds_sum{verb="GET"} 4.2
req_seconds_count{verb="GET"} 10
unwanted_total{a="b"} 7 1700000000000
'''


def test_matches_prometheus_client_on_every_kept_sample():
    ours = parse_text(EXPOSITION)
    theirs = {}
    for family in text_string_to_metric_families(EXPOSITION):
        for sample in family.samples:
            theirs.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    assert set(ours.samples) == set(theirs)
    for name, series in theirs.items():
        assert len(ours.samples[name]) == len(series)
        for (labels_a, value_a), (labels_b, value_b) in zip(ours.samples[name], series, strict=True):
            assert labels_a == labels_b
            assert value_a == value_b or (math.isnan(value_a) and math.isnan(value_b))


def test_filter_keeps_only_wanted_families_and_handles_split_chunks():
    parser = MetricsParser(["req_seconds", "process_resident_memory_bytes"])
    data = EXPOSITION.encode()
    for i in range(0, len(data), 7):  # lines cut at every possible place
        parser.feed(data[i:i + 7])
    parser.close()
    assert set(parser.samples) == {"req_seconds_bucket", "req_seconds_sum", "req_seconds_count",
                                   "process_resident_memory_bytes"}
    assert parser.samples["process_resident_memory_bytes"] == [({}, 123456789.0)]
    assert parser.types["req_seconds"] == "histogram"


def test_escaped_label_values():
    scrape = parse_text(EXPOSITION, ["weird"])
    labels, value = scrape.series("weird")[0]
    assert labels == {"path": "/a,b}c", "msg": 'say "hi"\nthere', "back": "\\"}
    assert value == math.inf


def test_histogram_quantile_by_hand():
    # 10 observations: 5 <= 0.1, 3 in (0.1, 0.5], 1 in (0.5, 1], 1 above 1.
    cumulative = [(0.1, 5.0), (0.5, 8.0), (1.0, 9.0), (math.inf, 10.0)]
    # p50: rank 5 -> falls at the top of the first bucket.
    assert histogram_quantile(0.5, cumulative) == pytest.approx(0.1)
    # p70: rank 7 -> 0.1 + 0.4 * (7 - 5) / 3
    assert histogram_quantile(0.7, cumulative) == pytest.approx(0.1 + 0.4 * 2 / 3)
    # p99: rank 9.9 -> in +Inf: the highest finite bound.
    assert histogram_quantile(0.99, cumulative) == pytest.approx(1.0)
    assert histogram_quantile(0.5, [(0.1, 0.0), (math.inf, 0.0)]) is None


def test_bucket_deltas_and_merge():
    old = parse_text(EXPOSITION, ["req_seconds"])
    newer_text = EXPOSITION.replace('le="0.1"} 5', 'le="0.1"} 6').replace('le="0.5"} 8', 'le="0.5"} 10') \
        .replace('le="1"} 9', 'le="1"} 11').replace('le="+Inf"} 10', 'le="+Inf"} 12')
    new = parse_text(newer_text, ["req_seconds"])
    (key, new_series), = buckets(new, "req_seconds").items()
    old_series = buckets(old, "req_seconds")[key]
    delta = delta_buckets(new_series, old_series)
    assert delta == [(0.1, 1.0), (0.5, 2.0), (1.0, 2.0), (math.inf, 2.0)]
    # a restart (counters lower than before) keeps the newer counts
    assert delta_buckets(old_series, new_series) == old_series
    assert merge_buckets([delta, delta])[-1] == (math.inf, 4.0)
