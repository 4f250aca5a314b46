"""The events log: transitions worth a person's attention, each once, time-stamped."""

from __future__ import annotations

import time
from collections.abc import Iterable

from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from crdscope.session.events import Event

from ..format import age
from .base import ProbePanel, one_line

#: Events drawn (the store keeps more for the recording's sake).
SHOWN = 200
SEVERITY_STYLE = {"fail": ("$probe-fail", "✗"), "warn": ("$probe-warn", "!"), "info": ("$probe-ok", "·")}


def event_markup(event: Event) -> str:
    """``12:04:31 ✗ health: API server restarted`` coloured by severity."""
    colour, mark = SEVERITY_STYLE.get(event.severity, ("$probe-idle", "·"))
    stamp = time.strftime("%H:%M:%S", time.localtime(event.timestamp))
    return f"[dim]{stamp}[/dim] [{colour}]{mark} {one_line(event.probe)}[/] {one_line(event.message)}"


class EventsPanel(ProbePanel):
    """Newest at the bottom, like a log."""

    probes = ("events",)
    panel_title = "Events"
    tab_label = "Events"
    shows = "transitions worth attention, once each"

    def compose_body(self) -> Iterable[Widget]:
        with VerticalScroll(classes="events-scroll"):
            yield Static("", id="events-log")

    def draw(self) -> None:
        events = list(self.store.events)[-SHOWN:]
        text = "\n".join(event_markup(e) for e in events)
        self.query_one("#events-log", Static).update(text)
        self.query_one(".events-scroll", VerticalScroll).scroll_end(animate=False)

    def status_markup(self) -> str:
        events = self.store.events
        if not events:
            return "[$probe-idle]no events yet: transitions appear here, once each[/]"
        newest = events[-1].timestamp
        problems = sum(1 for e in events if e.severity in ("warn", "fail"))
        return f"{len(events)} events ({problems} warnings) · newest {age(self.now() - newest)} ago"
