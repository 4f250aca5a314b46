""""Not answering" from the HTTP/2 PING: its own threshold, its evidence, its start; old samples unchanged."""

from __future__ import annotations

from crdscope.findings.checks import NOT_ANSWERING
from crdscope.findings.engine import FindingsEngine
from crdscope.findings.model import CLOSED, OPENED
from crdscope.base.samples.responsiveness import ResponsivenessSample
from crdscope.base.settings import Thresholds

THRESHOLDS = Thresholds(unanswered_seconds_critical=5.0, ping_unanswered_seconds_critical=2.5)


def pinged(at: float, waiting: float, state: str = "waiting", **fields) -> ResponsivenessSample:
    return ResponsivenessSample(timestamp=at, ping_state=state if waiting else "answering",
                                ping_waiting_seconds=waiting, ping_rtt_seconds=0.002, **fields)


def test_a_ping_unanswered_past_its_threshold_opens_once_citing_the_ping_and_closes_on_the_answer():
    engine = FindingsEngine(THRESHOLDS)
    changes = []
    for step in range(12):  # a PING sent at t=100 and unanswered, read every half second
        changes += engine.observe(pinged(100.0 + step / 2, step / 2))
    opened = [c for c in changes if c.change == OPENED]
    assert len(opened) == 1 and opened[0].timestamp == 103.0  # first reading over 2.5 s (3.0 s)
    finding = opened[0].finding
    assert finding.id == NOT_ANSWERING and finding.since == 100.0  # when the PING was sent
    assert finding.title == "API server not answering: no reply to requests or HTTP/2 PINGs"
    assert finding.evidence[0] == ("responsiveness.ping_waiting_seconds = 3.00 s: HTTP/2 PING unanswered for 3.00 s "
                                   "(the server answers PINGs without a request; threshold 2.5 s)")
    # Requests stuck too, later: the same finding, opened once.
    assert engine.observe(pinged(106.5, 6.5, unanswered_seconds=5.5, oldest_request_seconds=5.5,
                                 oldest_request="GET /readyz", in_flight=1)) == []
    # Resumed: the PING is answered a moment before the requests caught in the freeze; same title.
    assert engine.observe(pinged(107.0, 0.0, unanswered_seconds=6.0, oldest_request_seconds=6.0,
                                 oldest_request="GET /readyz", in_flight=1)) == []
    assert engine.current()[0].title == finding.title
    (closing,) = engine.observe(pinged(107.5, 0.0))
    assert closing.change == CLOSED and closing.duration_seconds == 7.5
    assert closing.finding.title == finding.title


def test_a_ping_within_its_threshold_is_no_finding_and_requests_keep_their_own_rule():
    engine = FindingsEngine(THRESHOLDS)
    assert engine.observe(pinged(10.0, 2.4)) == []
    # The server answers PINGs but a request waits (etcd stalls it, say): the 5 s rule still holds.
    (change,) = engine.observe(pinged(11.0, 0.0, unanswered_seconds=6.0, oldest_request_seconds=6.0,
                                      oldest_request="GET /api/v1/namespaces", in_flight=1))
    assert change.finding.title == "API server not answering: no reply to requests or HTTP/2 PINGs"
    assert change.finding.since == 5.0
    assert not any("PING" in line for line in change.finding.evidence)


def test_refused_connections_for_the_ping_read_as_unreachable():
    engine = FindingsEngine(THRESHOLDS)
    (change,) = engine.observe(pinged(20.0, 3.0, state="refused", ping_failure="connection refused"))
    assert change.finding.title.startswith("API server unreachable")
    assert "(connections for it refused)" in change.finding.evidence[0]
    assert "responsiveness.ping_failure = connection refused" in change.finding.evidence


def test_a_recorded_sample_without_ping_fields_is_judged_as_before():
    recorded = {"timestamp": 50.0, "error": None, "server": "https://x", "in_flight": 2,
                "oldest_request_seconds": 6.0, "oldest_request": "GET /readyz", "unanswered_seconds": 6.0,
                "since_answer_seconds": 6.0, "last_failure": None, "heartbeats": 1}
    (change,) = FindingsEngine(THRESHOLDS).observe(ResponsivenessSample.from_json(recorded))
    assert change.finding.title == "API server not answering: requests wait with no reply"
    assert change.finding.since == 44.0
    assert change.finding.evidence == (
        "responsiveness.oldest_request_seconds = 6.00 s (GET /readyz, waiting for its answer; threshold 5 s)",
        "responsiveness.in_flight = 2 requests of crdscope's shared client")
