"""The openapi probe's sample and the records it holds: what every front end reads of it (the probe
that makes it is ``probes/openapi.py``; readers import the sample from here, never the probe)."""

from __future__ import annotations

import dataclasses

from crdscope.base.samples import Sample, figure

@dataclasses.dataclass(frozen=True, kw_only=True)
class LagStats:
    """Seconds from creation to one stage, over the CRDs timed through it."""

    p50: float | None = None
    p95: float | None = None
    max: float | None = None
    count: int = figure(0, metric="observations", unitless=True)


@dataclasses.dataclass(frozen=True, kw_only=True)
class GroupVersionPublication:
    """One CRD group-version in the v3 index."""

    #: When the path appeared (None: already there at the first fetch).
    first_seen: float | None = None
    #: When its hash last changed (None: unchanged since the first fetch).
    hash_changed: float | None = None
    #: First 16 hex digits of the current hash ("" when the path is gone).
    hash: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class OpenAPISample(Sample):
    """The v3 index, each stage's publication lag, the backlog, and the last v2 fetch."""

    probe = "openapi"
    short_name = "oapi"

    v3_paths: int = 0
    v3_seconds: float = 0.0
    v3_status: int | None = None
    #: The index differs from the previous fetch (always True for the first fetch).
    v3_changed: bool = False
    #: The index answer carried an ETag (then an unchanged index answers 304).
    v3_etag: bool = False
    v3_bytes: int = 0
    group_versions: dict[str, GroupVersionPublication] = figure(default_factory=dict, exported=False)
    #: Seconds from creation to each stage: names_accepted, established, discovery, openapi_v3.
    lag_seconds: dict[str, LagStats] = figure(default_factory=dict, label="stage")
    #: CRDs Established but not yet in the v3 index, the oldest one's age, and the oldest names.
    backlog: int = 0
    backlog_oldest_seconds: float | None = None
    backlog_names: tuple[str, ...] = ()
    #: Why the discovery stage is not observed (None when it is).
    discovery_unobservable: str | None = None
    v2_status: int | None = None
    #: Size of the last full /openapi/v2 document, uncompressed (a 304 keeps the previous size).
    v2_bytes: int | None = None
    #: Bytes the last fetch transferred (compressed; about 0 for a 304).
    v2_wire_bytes: int | None = None
    v2_seconds: float | None = None
    v2_first_byte_seconds: float | None = None
    v2_content_type: str = ""
    v2_fetched_at: float | None = None
    v2_error: str | None = None
    #: Why v2 was not fetched yet ("" once it was).
    v2_note: str = ""
    #: Read passively from the shared /metrics scrape, where the server records them: /openapi/v2
    #: requests it served to any client since it started, and their seconds in all.
    v2_server_requests: int | None = None
    v2_server_seconds: float | None = None
    #: Why the index was not read this round ("" when it was): on servers before 1.27 it waits
    #: for CRDs to settle; the index figures above are then the last read's.
    v3_deferred: str = ""
