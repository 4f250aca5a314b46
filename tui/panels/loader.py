"""Loader: crdscope's own CRD load: source, progress, rate, ETA, Established and failed counts."""

from __future__ import annotations

from collections.abc import Iterable

from textual.widget import Widget
from textual.widgets import ProgressBar, Static

from crdscope.base.samples.loader import LoaderSample

from ..format import age, duration, number as fmt, rate
from .base import ProbePanel, one_line
from .text import pairs

STATE_ROLE = {"running": "probe-ok", "paused": "probe-warn", "stopping": "probe-warn",
              "stopped": "probe-warn", "done": "probe-ok", "idle": "probe-idle"}
#: Failures listed by name (the recording and ``crdscope load --json`` keep all of them).
FAILURES_SHOWN = 3


class LoaderPanel(ProbePanel):
    """Renders loader samples; ``l`` (or the palette) drives the loader."""

    probes = ("loader",)
    panel_title = "Loader"
    tab_label = "Loader"
    shows = "progress of crdscope's own CRD load"

    def compose_body(self) -> Iterable[Widget]:
        yield Static("", id="loader-source")
        # Hidden until a load reports: an indeterminate bar animates (and redraws) forever.
        bar = ProgressBar(total=None, show_eta=False, id="loader-bar")
        bar.display = False
        yield bar
        yield Static("", id="loader-counts")
        yield Static("", id="loader-pace")
        yield Static("", id="loader-problems")

    def status_markup(self) -> str:
        if self._draw_error:
            return super().status_markup()
        sample = self.store.latest_of(LoaderSample)
        control = self.cluster.loader
        if sample is None:
            if control is None:
                return "[$probe-idle]no loader in this session[/]"
            return f"[$probe-idle]idle: press l to load {one_line(control.source)}[/]"
        if sample.error:
            return f"[$probe-fail]✗ {one_line(sample.error)}[/]"
        state = sample.state
        role = STATE_ROLE.get(state, "probe-idle")
        hint = " · l: pause/stop" if state == "running" else " · l: resume/stop" if state == "paused" else \
            " · l: start/clean"
        return f"[${role}]● {one_line(state)}[/]{hint}"

    def draw(self) -> None:
        sample = self.store.latest_of(LoaderSample)
        if sample is None:
            control = self.cluster.loader
            if control is not None:
                self.query_one("#loader-source", Static).update(
                    pairs(("source", one_line(control.source)), ("", one_line(control.describe()))))
            return
        limit = sample.rate_limit_per_s
        pace = f"{limit:g}/s" if limit else "unlimited"
        self.query_one("#loader-source", Static).update(pairs(
            ("source", one_line(sample.source)), ("profile", one_line(sample.profile)),
            ("pace", pace), ("concurrency", fmt(sample.concurrency)),
            ("run", one_line(sample.run_id or "—"))))
        requested = sample.requested
        bar = self.query_one("#loader-bar", ProgressBar)
        bar.display = True
        bar.update(total=requested or None, progress=sample.established + sample.skipped + sample.failed)
        self.query_one("#loader-counts", Static).update(counts_line(sample))
        self.query_one("#loader-pace", Static).update(pairs(
            ("rate", rate(sample.crds_per_second, " CRDs/s")),
            ("ETA", age(sample.eta_seconds)),
            ("elapsed", age(sample.elapsed_seconds)),
            ("limiter waited", duration(sample.limiter_waited_seconds)),
            ("retries 429/5xx", f"{fmt(sample.retries_429)}/{fmt(sample.retries_5xx)}")))
        problems = [f"[$probe-fail]✗[/] {one_line(p.name)}: {one_line(p.reason)}"
                    for p in sample.failures[:FAILURES_SHOWN]]
        skips = sample.skips
        if skips:
            problems.append(f"[$probe-warn]skipped {len(skips)}[/]: " +
                            ", ".join(one_line(p.name) for p in skips[:FAILURES_SHOWN]))
        self.query_one("#loader-problems", Static).update("\n".join(problems))


def counts_line(sample: LoaderSample) -> str:
    """Every item's outcome so far: requested, sent, created, updated, Established, skipped, failed."""
    failed = sample.failed
    return pairs(
        ("requested", fmt(sample.requested) + ("" if sample.source_read else "…")),
        ("sent", fmt(sample.sent)), ("created", fmt(sample.created)),
        ("updated", fmt(sample.updated)),
        ("Established", f"[$probe-ok]{fmt(sample.established)}[/]"),
        ("skipped", fmt(sample.skipped)),
        ("failed", f"[$probe-fail]{fmt(failed)}[/]" if failed else "0"),
        ("pending", fmt(sample.pending)))
