"""The footprint probe's sample and the records it holds: what every front end reads of it (the probe
that makes it is ``probes/footprint.py``; readers import the sample from here, never the probe)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from crdscope.base.samples import Sample, figure

@dataclass(frozen=True, kw_only=True)
class Tally:
    """Requests sent and bytes received."""

    requests: int = figure(0, counter=True)
    bytes: int = figure(0, counter=True)


@dataclasses.dataclass(frozen=True, kw_only=True)
class FootprintSample(Sample):
    """crdscope's own requests and bytes to the server, by path and by part of the monitor."""

    probe = "footprint"
    short_name = "own"

    #: The monitor's requests since it started (the loader's excluded) and the answers' bytes.
    requests_total: int = figure(0, counter=True)
    bytes_total: int = figure(0, counter=True)
    #: Over the last ``window_seconds`` (at most :data:`RATE_WINDOW_SECONDS`).
    requests_per_second: float = 0.0
    bytes_per_second: float = 0.0
    window_seconds: float = 0.0
    #: "GET /openapi/v3/{group-version}" -> counts since start (the monitor's, loader excluded).
    by_path: dict[str, Tally] = figure(default_factory=dict, metric="path")
    #: Part of the monitor ("discovery", "metrics", "crd-watch", ...) -> counts since start.
    by_origin: dict[str, Tally] = figure(default_factory=dict, metric="origin")
    #: Part -> requests per minute over the budget window (None until it has run that long).
    per_minute: dict[str, float] = figure(default_factory=dict, label="origin")
    #: Parts whose requests per minute exceed their budget, and legacy walks per hour.
    over_budget: tuple[str, ...] = ()
    legacy_walks: int = figure(0, counter=True)
    #: The built-in loader's requests (the install itself, not the monitor's cost).
    loader_requests_total: int = figure(0, counter=True)
    loader_bytes_total: int = figure(0, counter=True)
    #: Whether ``/openapi/v2`` is measured (off by default: each fetch makes the server build it).
    openapi_v2: bool = False
    #: Heavy optional reads held back, and why ("openapi_v2": "memory at 91% of its limit").
    held_back: dict[str, str] = figure(default_factory=dict, label="feature")
    #: Viewers attached to this collector (``--serve-view``; 0 with none or none served) and the CPU
    #: spent on them: seconds since start, and the share of one core over the rate window.
    viewers: int = 0
    viewer_cpu_seconds_total: float = figure(0.0, counter=True)
    viewer_cpu_share: float = 0.0


@dataclasses.dataclass(frozen=True)
class ViewerLoad:
    """What a collector's viewers cost it (``session.viewstream.ViewHub.load``): how many are
    connected, the CPU spent encoding for and writing to them, and the bytes sent."""

    viewers: int = 0
    cpu_seconds: float = 0.0
    bytes_sent: int = 0


def _bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GiB"  # pragma: no cover - the loop returns


def one_line(sample: FootprintSample) -> str:
    """``crdscope's own load: 0.42 requests/s, 3.1 KiB/s (612 requests, 4.2 MiB since start)``."""
    line = (f"crdscope's own load on the server: {sample.requests_per_second:.2f} requests/s, "
            f"{_bytes(sample.bytes_per_second)}/s ({sample.requests_total:,} requests, "
            f"{_bytes(sample.bytes_total)} since start")
    if sample.loader_requests_total:
        line += f"; the loader's install: {sample.loader_requests_total:,} requests more"
    line += ")"
    if sample.over_budget:
        line += f"; over budget: {', '.join(sample.over_budget)}"
    if sample.held_back:
        line += f"; held back: {', '.join(sorted(sample.held_back))}"
    if sample.viewers or sample.viewer_cpu_seconds_total:
        line += (f"; serving {sample.viewers} viewer{'s' if sample.viewers != 1 else ''}: "
                 f"{sample.viewer_cpu_share * 100:.2f}% of a core")
    return line


def table(sample: FootprintSample, rows: int = 12) -> list[str]:
    """Per part and per path: requests and bytes since start, busiest first."""
    lines = [one_line(sample), "by part of the monitor (requests, bytes; per minute over the last 5 min):"]
    for origin_name, tally in sorted(sample.by_origin.items(), key=lambda kv: -kv[1].requests)[:rows]:
        rate = sample.per_minute.get(origin_name)
        lines.append(f"  {origin_name:<16} {tally.requests:>7,} {_bytes(tally.bytes):>11}"
                     + (f"  {rate:5.1f}/min" if rate is not None else ""))
    lines.append("by path:")
    for path, tally in sorted(sample.by_path.items(), key=lambda kv: -kv[1].bytes)[:rows]:
        lines.append(f"  {path:<48} {tally.requests:>7,} {_bytes(tally.bytes):>11}")
    v2 = ("/openapi/v2 measured (each fetch makes the server build the whole document)" if sample.openapi_v2
          else "/openapi/v2 not fetched (--openapi-v2 measures it, at the cost of a server-side build)")
    lines.append(v2)
    for feature, why in sorted(sample.held_back.items()):
        lines.append(f"held back: {feature}: {why}")
    return lines
