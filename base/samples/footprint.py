"""The footprint probe's sample and the records it holds: what every front end reads of it (the probe
that makes it is ``probes/footprint.py``; readers import the sample from here, never the probe)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from crdscope.base.samples import Sample

@dataclass(frozen=True, kw_only=True)
class Tally:
    """Requests sent and bytes received."""

    requests: int = 0
    bytes: int = 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class FootprintSample(Sample):
    """crdscope's own requests and bytes to the server, by path and by part of the monitor."""

    probe = "footprint"

    #: The monitor's requests since it started (the loader's excluded) and the answers' bytes.
    requests_total: int = 0
    bytes_total: int = 0
    #: Over the last ``window_seconds`` (at most :data:`RATE_WINDOW_SECONDS`).
    requests_per_second: float = 0.0
    bytes_per_second: float = 0.0
    window_seconds: float = 0.0
    #: "GET /openapi/v3/{group-version}" -> counts since start (the monitor's, loader excluded).
    by_path: dict[str, Tally] = dataclasses.field(default_factory=dict)
    #: Part of the monitor ("discovery", "metrics", "crd-watch", ...) -> counts since start.
    by_origin: dict[str, Tally] = dataclasses.field(default_factory=dict)
    #: Part -> requests per minute over the budget window (None until it has run that long).
    per_minute: dict[str, float] = dataclasses.field(default_factory=dict)
    #: Parts whose requests per minute exceed their budget, and legacy walks per hour.
    over_budget: tuple[str, ...] = ()
    legacy_walks: int = 0
    #: The built-in loader's requests (the install itself, not the monitor's cost).
    loader_requests_total: int = 0
    loader_bytes_total: int = 0
    #: Whether ``/openapi/v2`` is measured (off by default: each fetch makes the server build it).
    openapi_v2: bool = False
    #: Heavy optional reads held back, and why ("openapi_v2": "memory at 91% of its limit").
    held_back: dict[str, str] = dataclasses.field(default_factory=dict)
