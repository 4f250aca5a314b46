"""Loader: crdscope's own CRD load: source, progress, rate, ETA, Established and failed counts."""

from __future__ import annotations

from collections.abc import Iterable

from textual.widget import Widget
from textual.widgets import ProgressBar, Static

from crdscope.session.values import get, items, number

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
        sample = self.store.latest("loader")
        control = getattr(self.app, "loader", None)
        if sample is None:
            if control is None:
                return "[$probe-idle]no loader in this session[/]"
            return f"[$probe-idle]idle: press l to load {one_line(control.source)}[/]"
        if sample.error:
            return f"[$probe-fail]✗ {one_line(sample.error)}[/]"
        state = str(get(sample, "state", "idle"))
        role = STATE_ROLE.get(state, "probe-idle")
        hint = " · l: pause/stop" if state == "running" else " · l: resume/stop" if state == "paused" else \
            " · l: start/clean"
        return f"[${role}]● {one_line(state)}[/]{hint}"

    def draw(self) -> None:
        sample = self.store.latest("loader")
        if sample is None:
            control = getattr(self.app, "loader", None)
            if control is not None:
                self.query_one("#loader-source", Static).update(
                    pairs(("source", one_line(control.source)), ("", one_line(control.describe()))))
            return
        limit = number(get(sample, "rate_limit_per_s"))
        pace = f"{limit:g}/s" if limit else "unlimited"
        self.query_one("#loader-source", Static).update(pairs(
            ("source", one_line(get(sample, "source", ""))), ("profile", one_line(get(sample, "profile", ""))),
            ("pace", pace), ("concurrency", fmt(get(sample, "concurrency"))),
            ("run", one_line(get(sample, "run_id", "") or "—"))))
        requested = number(get(sample, "requested")) or 0
        bar = self.query_one("#loader-bar", ProgressBar)
        bar.display = True
        done = (number(get(sample, "established")) or 0) + (number(get(sample, "skipped")) or 0) + \
            (number(get(sample, "failed")) or 0)
        bar.update(total=requested or None, progress=done)
        failed = number(get(sample, "failed")) or 0
        self.query_one("#loader-counts", Static).update(pairs(
            ("requested", fmt(requested) + ("" if get(sample, "source_read", True) else "…")),
            ("sent", fmt(get(sample, "sent"))), ("created", fmt(get(sample, "created"))),
            ("updated", fmt(get(sample, "updated"))),
            ("Established", f"[$probe-ok]{fmt(get(sample, 'established'))}[/]"),
            ("skipped", fmt(get(sample, "skipped"))),
            ("failed", f"[$probe-fail]{fmt(failed)}[/]" if failed else "0"),
            ("pending", fmt(get(sample, "pending")))))
        self.query_one("#loader-pace", Static).update(pairs(
            ("rate", rate(number(get(sample, "crds_per_second")), " CRDs/s")),
            ("ETA", age(number(get(sample, "eta_seconds")))),
            ("elapsed", age(number(get(sample, "elapsed_seconds")))),
            ("limiter waited", duration(number(get(sample, "limiter_waited_seconds")))),
            ("retries 429/5xx", f"{fmt(get(sample, 'retries_429'))}/{fmt(get(sample, 'retries_5xx'))}")))
        problems = [f"[$probe-fail]✗[/] {one_line(get(p, 'name', ''))}: {one_line(get(p, 'reason', ''))}"
                    for p in items(get(sample, "failures"))[:FAILURES_SHOWN]]
        skips = items(get(sample, "skips"))
        if skips:
            problems.append(f"[$probe-warn]skipped {len(skips)}[/]: " +
                            ", ".join(one_line(get(p, "name", "")) for p in skips[:FAILURES_SHOWN]))
        self.query_one("#loader-problems", Static).update("\n".join(problems))
