"""Throttling / APF: per priority level queues, seats and rejections; 429s crdscope received."""

from __future__ import annotations

from collections.abc import Iterable

from textual.widget import Widget
from textual.widgets import Static

from crdscope.base.samples.throttling import PriorityLevel, ThrottlingSample
from crdscope.base.samples.health import HealthSample, replica_named
from crdscope.base.settings import Thresholds
from crdscope.findings.checks import APF_REJECTING_HARD

from ..format import DASH, age, duration, number as fmt, rate
from .base import ProbePanel, one_line
from .text import Cell, columns, pairs

#: Priority levels listed (busiest first).
LEVELS_SHOWN = 8


def level_rows(sample: ThrottlingSample, thresholds: Thresholds) -> list[list[Cell]]:
    """One row per priority level: busiest (rejecting, queueing, executing) first; rejections coloured
    as the APF finding judges them (a warning, critical from ``APF_REJECTING_HARD``)."""
    def busy(level: PriorityLevel) -> tuple[float, int, int, str]:
        return (-(level.rejected_per_s or 0), -level.inqueue, -level.executing_seats, level.name)

    rows: list[list[Cell]] = []
    for level in sorted(sample.priority_levels, key=busy)[:LEVELS_SHOWN]:
        seats = level.executing_seats
        limit = level.limit_seats
        full = limit is not None and limit > 0 and seats >= limit
        rejected = level.rejected_per_s
        inqueue = level.inqueue
        rows.append([
            level.name,
            (fmt(inqueue), "probe-warn" if inqueue else ""),
            (f"{fmt(seats)}/{fmt(limit) if limit is not None else DASH}", "probe-warn" if full else ""),
            (rate(rejected) if rejected is not None else DASH,
             "probe-fail" if APF_REJECTING_HARD.crossed(rejected, thresholds) else "probe-warn" if rejected else ""),
            duration(level.wait_p99_seconds),
        ])
    return rows


def responses_line(sample: ThrottlingSample, now: float) -> str:
    """429s crdscope's own requests received, with the newest one's Retry-After."""
    answered = sample.responses_429
    total = answered.total
    if not total:
        return "429s to crdscope: [b]0[/b]"
    recent = answered.recent
    line = f"[$probe-fail]429s to crdscope: [b]{fmt(total)}[/b][/] (+{fmt(answered.since_last_run)})"
    if recent:
        newest = recent[-1]
        retry = newest.retry_after_seconds
        line += (f" · last {age(now - newest.timestamp)} ago "
                 f"{one_line(newest.method)} {one_line(newest.path)}"
                 f" Retry-After {duration(retry) if retry is not None else DASH}"
                 f" ({one_line(newest.priority_level or '?')})")
    return line


class ThrottlingPanel(ProbePanel):
    """API Priority and Fairness between two scrapes, and client-side limits."""

    probes = ("throttling",)
    panel_title = "Throttling / APF"
    tab_label = "APF"
    shows = "API Priority and Fairness: queues, seats, rejections, 429s"

    def compose_body(self) -> Iterable[Widget]:
        yield Static("", id="throttling-summary")
        yield Static("", id="throttling-levels")
        yield Static("", id="throttling-client")

    def draw(self) -> None:
        sample = self.store.last_good_of(ThrottlingSample)
        if sample is None:
            return
        rejected = sample.rejected_per_s
        replica = answering_replica(sample, self.store.last_good_of(HealthSample))
        summary = pairs(("rejected", rate(rejected) if rejected is not None else DASH),
                        ("window", duration(sample.interval_seconds)),
                        ("from", one_line(replica)) if replica else None)  # several API servers: whose rates
        summary += "\n" + responses_line(sample, self.now())
        missing = sample.unobservable
        if missing:
            summary += "\n" + "\n".join(f"[$probe-idle]{one_line(k)}: {one_line(v)}[/]" for k, v in missing.items())
        self.query_one("#throttling-summary", Static).update(summary)
        rows = level_rows(sample, self.cluster.thresholds)
        self.query_one("#throttling-levels", Static).update(
            columns(("priority level", "inQ", "seats", "rej/s", "wait p99"), rows, max_widths=(26, 0, 0, 0, 0))
            if rows else "[$probe-idle]no priority levels reported[/]")
        self.query_one("#throttling-client", Static).update(client_lines(sample))


def answering_replica(sample: ThrottlingSample, health: HealthSample | None) -> str | None:
    """The replica whose counters the sample's rates come from, where the cluster runs several."""
    if health is None or len(health.replicas) < 2:
        return None
    return replica_named(health.replicas, sample.process_start_time_seconds)


def client_lines(sample: ThrottlingSample) -> str:
    """Where the server put crdscope's requests, and crdscope's own token bucket."""
    lines = []
    flows = sample.own_flows
    if flows:
        lines.append("crdscope's flow: " + ", ".join(
            f"{one_line(f.flow_schema or '?')} → {one_line(f.priority_level or '?')}" for f in flows[:2]))
    limiter = sample.client_limiter
    if limiter is not None:
        lines.append("loader limiter " + pairs(
            ("qps", f"{limiter.qps or 0:g}"), ("burst", fmt(limiter.burst)),
            ("waited", duration(limiter.waited_seconds))))
    return "\n".join(lines)
