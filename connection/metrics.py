"""One shared, streaming ``/metrics`` scrape, parsed down to the families in use.

On a cluster with thousands of CRDs ``/metrics`` is many megabytes (every
resource multiplies the request and storage families).  The scrape is parsed
chunk by chunk as it arrives, a line is dropped unless its metric name is one
a probe asked for, and the event loop gets a turn between chunks.  Several
probes (throttling, health, latency) share one scrape through
:class:`MetricsSource`.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from array import array
from dataclasses import dataclass, field
from typing import overload
from collections.abc import Callable, Iterable, Iterator, Sequence


from .cluster import Cluster, explain, status_message
from .traffic import METRICS as METRICS_ORIGIN, REQUEST_ORIGIN
from .transport import TRANSPORT_ERRORS

Labels = dict[str, str]
LabelKey = tuple[tuple[str, str], ...]

_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')
_SUFFIXES = ("", "_bucket", "_sum", "_count", "_total", "_created")


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    return value.replace("\\\\", "\0").replace('\\"', '"').replace("\\n", "\n").replace("\0", "\\")


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        lowered = text.lower()
        if lowered in ("+inf", "inf"):
            return math.inf
        if lowered == "-inf":
            return -math.inf
        return math.nan


class Series(Sequence[tuple[Labels, float]]):
    """The ``(labels, value)`` samples of one metric name, stored as two columns.

    A list of tuples would hold one tuple per sample that the garbage collector
    tracks for good (a tuple holding a dict is never untracked), and each full
    collection during a 50 MB scrape would walk hundreds of thousands of them,
    pausing the event loop for tens of milliseconds.  Label dicts of strings are
    not tracked, and the values live unboxed in an array.
    """

    __slots__ = ("labels", "values")

    def __init__(self, samples: Iterable[tuple[Labels, float]] = ()) -> None:
        self.labels: list[Labels] = []
        self.values = array("d")
        for labels, value in samples:
            self.append(labels, value)

    def append(self, labels: Labels, value: float) -> None:
        self.labels.append(labels)
        self.values.append(value)

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, index: int) -> tuple[Labels, float]: ...
    @overload
    def __getitem__(self, index: slice) -> list[tuple[Labels, float]]: ...

    def __getitem__(self, index: int | slice) -> tuple[Labels, float] | list[tuple[Labels, float]]:
        if isinstance(index, slice):
            return list(zip(self.labels[index], self.values[index], strict=True))
        return self.labels[index], self.values[index]

    def __iter__(self) -> Iterator[tuple[Labels, float]]:
        return zip(self.labels, self.values, strict=True)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Series, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __repr__(self) -> str:
        return f"Series({list(self)!r})"


class MetricsParser:
    """Incremental parser of the Prometheus text format, keeping wanted families only.

    ``feed`` takes chunks of bytes as they arrive; nothing but the unfinished
    last line (as bytes, so a UTF-8 character cut by a chunk boundary survives)
    and the kept samples is held in memory.  A line is first tested with one
    ``str.startswith`` against the wanted names (C speed), so unwanted lines cost
    almost nothing.  Consecutive histogram buckets of one series differ only in
    their trailing ``le`` label: the labels before it are parsed once per series
    and the bucket's dict is a copy sharing their strings (faster, and far less
    memory for kept histograms).
    """

    #: A "line" longer than this without a newline is garbage (or an attack): drop it.
    MAX_LINE_BYTES = 1 << 20

    def __init__(self, families: Iterable[str] | None = None) -> None:
        wanted = set(families or ())
        #: None keeps everything (used by tests and the fuzzer).
        self._names: set[str] | None = {f + s for f in wanted for s in _SUFFIXES} if wanted else None
        # str.startswith with a tuple runs in C: the cheap first filter for each line.
        self._prefixes = tuple(sorted(wanted)) if wanted else ("",)
        self.samples: dict[str, Series] = {}
        self.types: dict[str, str] = {}
        self.lines = 0
        self.bad_lines = 0
        self.bytes = 0
        self._carry = b""
        # The labels before ``le`` of the series being read (see the class docstring).
        self._series_prefix = ""
        self._series_labels: Labels = {}

    def feed(self, chunk: bytes) -> None:
        """Parse a chunk; a line cut in half waits for the next chunk."""
        self.bytes += len(chunk)
        end = chunk.rfind(b"\n")
        if end == -1:
            self._carry += chunk
            if len(self._carry) > self.MAX_LINE_BYTES:
                self.bad_lines += 1
                self._carry = b""
            return
        data = self._carry + chunk[:end] if self._carry else chunk[:end]
        self._carry = chunk[end + 1:]
        self._parse_lines(data.decode("utf-8", "replace").split("\n"))

    def close(self) -> None:
        """Parse whatever remains after the last chunk."""
        if self._carry:
            self._parse_lines([self._carry.decode("utf-8", "replace")])
            self._carry = b""

    def _parse_lines(self, lines: list[str]) -> None:
        prefixes, names, samples = self._prefixes, self._names, self.samples
        self.lines += len(lines)
        for line in lines:
            if not line.startswith(prefixes) or line[:1] == "#" or not line:
                if line.startswith("# TYPE "):
                    self._type_line(line)
                continue
            brace = line.find("{")
            space = line.find(" ")
            if brace != -1 and (space == -1 or brace < space):
                name = line[:brace].rstrip()
                if names is not None and name not in names:
                    continue
                close = line.rfind("}")
                if close < brace:
                    self.bad_lines += 1
                    continue
                labels = self._labels(line[brace + 1:close]) if close > brace + 1 else {}
                rest = line[close + 1:].split()
            else:
                if space == -1:
                    if line.strip():
                        self.bad_lines += 1
                    continue
                name = line[:space]
                if names is not None and name not in names:
                    continue
                labels = {}
                rest = line[space + 1:].split()
            if not rest:
                self.bad_lines += 1
                continue
            try:
                value = float(rest[0])
            except ValueError:
                value = _float(rest[0])
            series = samples.get(name)
            if series is None:
                series = samples[name] = Series()
            series.labels.append(labels)
            series.values.append(value)

    def _labels(self, body: str) -> Labels:
        """The labels of one ``{...}`` body, reusing the series' labels for a bucket line."""
        cut = body.rfind(',le="')
        # The fast path needs ``le`` last with a plain value: the next quote ends the body.
        if cut > 0 and body.find('"', cut + 5) == len(body) - 1 and "\\" not in body[cut:]:
            prefix = body[:cut]
            if prefix != self._series_prefix:
                self._series_prefix = prefix
                self._series_labels = _parse_labels(prefix)
            labels = self._series_labels.copy()
            labels["le"] = body[cut + 5:-1]
            return labels
        return _parse_labels(body)

    def _type_line(self, line: str) -> None:
        parts = line.split()
        if len(parts) >= 4:
            family = parts[2]
            if self._names is None or family in self._names:
                self.types[family] = parts[3]


def _parse_labels(body: str) -> Labels:
    if "\\" in body:
        return {k: _unescape(v) for k, v in _LABEL.findall(body)}
    return dict(_LABEL.findall(body))


@dataclass(frozen=True)
class Scrape:
    """One parsed ``/metrics`` answer (only the families asked for)."""

    timestamp: float
    samples: dict[str, Series] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    bytes: int = 0
    seconds: float = 0.0
    lines: int = 0
    error: str | None = None
    status: int | None = None  # HTTP status (403 means "not allowed", not "down")
    #: The families this scrape kept; None = every family.
    families: frozenset[str] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def series(self, name: str) -> Sequence[tuple[Labels, float]]:
        """Every (labels, value) of sample name ``name``."""
        return self.samples.get(name, ())

    def value(self, name: str, **match: str) -> float | None:
        """The first value of ``name`` whose labels include ``match``; None if absent."""
        for labels, value in self.series(name):
            if all(labels.get(k) == v for k, v in match.items()):
                return value
        return None

    def total(self, name: str, **match: str) -> float | None:
        """The sum over every series of ``name`` matching ``match``; None if absent."""
        values = [v for labels, v in self.series(name) if all(labels.get(k) == w for k, w in match.items())]
        return sum(values) if values else None

    def by(self, name: str, *keys: str, **match: str) -> dict[tuple[str, ...], float]:
        """Sum ``name`` grouped by the label values ``keys``."""
        grouped: dict[tuple[str, ...], float] = {}
        for labels, value in self.series(name):
            if all(labels.get(k) == w for k, w in match.items()):
                group = tuple(labels.get(k, "") for k in keys)
                grouped[group] = grouped.get(group, 0.0) + value
        return grouped

    def has(self, name: str) -> bool:
        return bool(self.samples.get(name))

    def covers(self, families: Iterable[str]) -> bool:
        """True when this scrape kept every family in ``families``."""
        return self.families is None or self.families.issuperset(families)


def parse_text(text: str | bytes, families: Iterable[str] | None = None) -> Scrape:
    """Parse a whole exposition at once (tests, saved scrapes, the benchmark)."""
    parser = MetricsParser(families)
    data = text.encode() if isinstance(text, str) else text
    for start in range(0, len(data), 1 << 16):
        parser.feed(data[start:start + (1 << 16)])
    parser.close()
    return Scrape(time.time(), parser.samples, parser.types, parser.bytes, 0.0, parser.lines,
                  families=frozenset(families) if families else None)


# --------------------------------------------------------------------------- histograms


def buckets(scrape: Scrape, family: str, **match: str) -> dict[LabelKey, list[tuple[float, float]]]:
    """Histogram buckets of ``family`` per label set (``le`` removed), sorted by bound."""
    grouped: dict[LabelKey, list[tuple[float, float]]] = {}
    for labels, value in scrape.series(family + "_bucket"):
        if not all(labels.get(k) == v for k, v in match.items()):
            continue
        le = _float(labels.get("le", "+Inf"))
        rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        grouped.setdefault(rest, []).append((le, value))
    for series in grouped.values():
        series.sort()
    return grouped


def merge_buckets(series: Iterable[list[tuple[float, float]]]) -> list[tuple[float, float]]:
    """Add several histograms with the same bounds (e.g. summed over resources)."""
    total: dict[float, float] = {}
    for one in series:
        for le, count in one:
            total[le] = total.get(le, 0.0) + count
    return sorted(total.items())


def delta_buckets(newer: list[tuple[float, float]], older: list[tuple[float, float]] | None
                  ) -> list[tuple[float, float]]:
    """Cumulative bucket counts observed between two scrapes (a counter reset keeps ``newer``)."""
    if not older:
        return list(newer)
    before = dict(older)
    result = [(le, count - before.get(le, 0.0)) for le, count in newer]
    if any(count < 0 for _, count in result):  # the server restarted: counters began again
        return list(newer)
    return result


def histogram_quantile(q: float, cumulative: list[tuple[float, float]]) -> float | None:
    """Prometheus' ``histogram_quantile``: linear interpolation inside the bucket.

    ``cumulative`` is [(upper bound, cumulative count)], sorted, ending in +Inf.
    Returns None when no observation was made.
    """
    if not cumulative:
        return None
    total = cumulative[-1][1]
    if total <= 0 or math.isnan(total):
        return None
    rank = q * total
    previous_bound, previous_count = 0.0, 0.0
    for bound, count in cumulative:
        if count >= rank:
            if math.isinf(bound):
                # Prometheus answers the highest finite bound when the quantile falls in +Inf.
                return previous_bound
            if count == previous_count:
                return bound
            return previous_bound + (bound - previous_bound) * (rank - previous_count) / (count - previous_count)
        previous_bound, previous_count = bound, count
    return previous_bound


# --------------------------------------------------------------------------- the shared scrape

#: A probe takes another probe's scrape younger than this fraction of its own cadence.  Probes
#: re-arm after their runs, so their phases drift apart; at nine tenths, probes on the same
#: cadence still share one scrape per period instead of taking two.
SHARED_SCRAPE_AGE = 0.9
#: The API server's process gauges, written once: sample field -> /metrics family.  The health
#: probe, its per-replica figures and the Prometheus source read them under these names.
PROCESS_FAMILIES = {
    "rss_bytes": "process_resident_memory_bytes",
    "heap_bytes": "go_memstats_heap_inuse_bytes",
    "goroutines": "go_goroutines",
    "start_time": "process_start_time_seconds",
    "open_fds": "process_open_fds",
    "max_fds": "process_max_fds",
}


class MetricsSource:
    """The one ``/metrics`` scrape every probe of a cluster shares.

    Probes declare the families they read with :meth:`want`; :meth:`scrape`
    returns the last scrape when it is fresh enough (and kept every wanted
    family), joins one in flight, or starts a new one: never two at once.
    """

    #: Yield to the event loop after this many bytes of parsing (one chunk parses in a few ms).
    YIELD_EVERY_BYTES = 1 << 16
    CHUNK_BYTES = 1 << 16

    #: A whole scrape ends by then: httpx's read timeout bounds each read, and a server that
    #: trickles bytes would otherwise keep the one shared scrape (and every probe joining it) forever.
    DEADLINE_SECONDS = 90.0

    def __init__(self, cluster: Cluster, families: Iterable[str] = (), *,
                 deadline_seconds: float | None = None) -> None:
        self.cluster = cluster
        self.deadline_seconds = deadline_seconds or self.DEADLINE_SECONDS
        self.families: set[str] = set(families)
        self.last: Scrape | None = None
        self.scrapes = 0
        self._inflight: asyncio.Task[Scrape] | None = None
        #: Set by :meth:`spread_over_replicas`: the client that opens a connection per scrape.
        self.spread: Cluster | None = None
        #: Called with every scrape taken, whoever asked (the health probe attributes each to its replica).
        self.listeners: list[Callable[[Scrape], None]] = []

    def spread_over_replicas(self) -> None:
        """Scrape over a new connection each time from now on.

        A load balancer in front of several API servers pins a connection to one of them, and
        the shared client keeps its connection: every scrape would read the same replica.  A
        client that keeps no connection alive lets the balancer hand each scrape to the next.
        """
        if self.spread is None:
            import httpx

            self.spread = Cluster(self.cluster.config, http2=False, traffic=self.cluster.traffic,
                                  limits=httpx.Limits(max_connections=2, max_keepalive_connections=0))

    def want(self, *families: str) -> None:
        """Add families to keep (a later :meth:`scrape` will not reuse a scrape without them)."""
        self.families.update(families)

    async def scrape(self, max_age: float = 0.0) -> Scrape:
        """A scrape no older than ``max_age`` seconds; failures come back as ``Scrape.error``."""
        last = self.last
        if last is not None and time.time() - last.timestamp <= max_age and last.covers(self.families):
            return last
        inflight = self._inflight
        if inflight is None or inflight.done():
            inflight = self._start()
        # shield: a cancelled waiter must not cancel the scrape other probes wait on.
        joined = await asyncio.shield(inflight)
        if joined.covers(self.families):
            return joined
        # A family was wanted after that scrape began: scrape again, still one at a time.
        current = self._inflight
        if current is inflight or current is None or current.done():
            current = self._start()
        return await asyncio.shield(current)

    def _start(self) -> asyncio.Task[Scrape]:
        self._inflight = asyncio.ensure_future(self._fetch(frozenset(self.families)))
        return self._inflight

    async def _fetch(self, families: frozenset[str]) -> Scrape:
        REQUEST_ORIGIN.set(METRICS_ORIGIN)  # this task's own context: one scrape serves every probe
        parser = MetricsParser(families)
        started = time.perf_counter()
        stamp = time.time()
        kept = families or None
        answered: list[int] = []  # the HTTP status, once known
        try:
            async with asyncio.timeout(self.deadline_seconds):
                error = await self._stream(parser, answered)
        except TimeoutError:  # before the transport errors: TimeoutError is an OSError, and this is the deadline
            error = f"{self.cluster.server}/metrics did not finish within {self.deadline_seconds:g}s"
        except TRANSPORT_ERRORS as exc:
            error = explain(exc, self.cluster.server)
        status = answered[0] if answered else None
        if error is not None:
            scrape = Scrape(stamp, error=error, status=status, seconds=time.perf_counter() - started, families=kept)
        else:
            scrape = Scrape(stamp, parser.samples, parser.types, parser.bytes,
                            time.perf_counter() - started, parser.lines, status=status, families=kept)
        self._keep(scrape)
        return scrape

    async def _stream(self, parser: MetricsParser, answered: list[int]) -> str | None:
        """Feed the answer to ``parser`` chunk by chunk; a one-line error for a non-200 answer."""
        client = (self.spread or self.cluster).client
        async with client.stream("GET", "/metrics", headers={"Accept": "text/plain"}) as response:
            answered.append(response.status_code)
            if response.status_code != 200:
                await response.aread()
                return f"/metrics answered {response.status_code}: {status_message(response)}"
            since_yield = 0
            async for chunk in response.aiter_bytes(self.CHUNK_BYTES):
                parser.feed(chunk)
                since_yield += len(chunk)
                if since_yield >= self.YIELD_EVERY_BYTES:
                    since_yield = 0
                    await asyncio.sleep(0)  # keep keys answering during a 50 MB scrape
            parser.close()
        return None

    def _keep(self, scrape: Scrape) -> None:
        # Probes that need rates keep their own previous scrape: they run on different cadences.
        self.scrapes += 1
        self.last = scrape
        for listener in self.listeners:
            listener(scrape)
