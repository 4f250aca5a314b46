"""The responsiveness probe's sample and the records it holds: what every front end reads of it (the probe
that makes it is ``probes/responsiveness.py``; readers import the sample from here, never the probe)."""

from __future__ import annotations

from dataclasses import dataclass

from crdscope.base.samples import Sample, figure

@dataclass(frozen=True, kw_only=True)
class ResponsivenessSample(Sample):
    """Requests of crdscope's shared client waiting for the server, and for how long."""

    probe = "responsiveness"

    server: str = ""
    in_flight: int = 0
    #: How long the oldest request in flight has waited for its answer (0: none in flight).
    oldest_request_seconds: float = 0.0
    #: That request, "GET /readyz".
    oldest_request: str = ""
    #: How long the server has left crdscope without an answer: the oldest request's wait, or
    #: the time since the first transport failure (refused, timed out) after the last answer.
    unanswered_seconds: float = 0.0
    #: Since the server last answered anything (None: it never has, since the monitor started).
    since_answer_seconds: float | None = None
    #: The latest transport failure since the last answer ("ConnectError", "ReadTimeout").
    last_failure: str | None = None
    heartbeats: int = figure(0, counter=True)
    #: The HTTP/2 PING (:mod:`connection.h2ping`): "answering", "waiting" (a PING unanswered for over
    #: half a second), "connecting", "refused", "unreachable", "starting"; "unsupported" or "off"
    #: (the /livez heartbeat instead); "" in recordings made before it existed.
    ping_state: str = ""
    #: How long the server has left a PING (or a connection being opened for one) unanswered,
    #: since it last answered one (0.0: nothing waits; None: no PING in use).
    ping_waiting_seconds: float | None = None
    #: Round trip of the latest answered PING (None: none answered yet, or no PING in use).
    ping_rtt_seconds: float | None = None
    #: Why PINGs are unsupported, or the latest failure to connect for them (one line).
    ping_failure: str | None = None
