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
from dataclasses import dataclass, field
from typing import Iterable

import httpx

from .cluster import Cluster, explain, status_message

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


def label_key(labels: Labels) -> LabelKey:
    """A hashable, order-independent key for a label set."""
    return tuple(sorted(labels.items()))


class MetricsParser:
    """Incremental parser of the Prometheus text format, keeping wanted families only.

    ``feed`` takes chunks of bytes as they arrive; nothing but the unfinished
    last line and the kept samples is held in memory.
    """

    def __init__(self, families: Iterable[str] | None = None) -> None:
        wanted = set(families or ())
        #: None keeps everything (used by tests and the fuzzer).
        self._names: set[str] | None = {f + s for f in wanted for s in _SUFFIXES} if wanted else None
        # str.startswith with a tuple runs in C: the cheap first filter for each line.
        self._prefixes = tuple(sorted(wanted)) if wanted else ("",)
        self.samples: dict[str, list[tuple[Labels, float]]] = {}
        self.types: dict[str, str] = {}
        self.lines = 0
        self.bad_lines = 0
        self.bytes = 0
        self._carry = ""

    def feed(self, chunk: bytes) -> None:
        """Parse a chunk; a line cut in half waits for the next chunk."""
        self.bytes += len(chunk)
        text = self._carry + chunk.decode("utf-8", "replace")
        lines = text.split("\n")
        self._carry = lines.pop()
        self._parse_lines(lines)

    def close(self) -> None:
        """Parse whatever remains after the last chunk."""
        if self._carry:
            self._parse_lines([self._carry])
            self._carry = ""

    def _parse_lines(self, lines: list[str]) -> None:
        prefixes, names, samples = self._prefixes, self._names, self.samples
        self.lines += len(lines)
        for line in lines:
            if not line.startswith(prefixes):
                if line.startswith("# TYPE "):
                    self._type_line(line)
                continue
            if line[0] == "#":
                if line.startswith("# TYPE "):
                    self._type_line(line)
                continue
            brace = line.find("{")
            space = line.find(" ")
            if brace != -1 and (space == -1 or brace < space):
                name = line[:brace].strip()
                close = line.rfind("}")
                if close < brace:
                    self.bad_lines += 1
                    continue
                body = line[brace + 1:close]
                labels = {k: _unescape(v) for k, v in _LABEL.findall(body)} if body else {}
                rest = line[close + 1:].split()
            else:
                if space == -1:
                    if line.strip():
                        self.bad_lines += 1
                    continue
                name = line[:space]
                labels = {}
                rest = line[space + 1:].split()
            if names is not None and name not in names:
                continue
            if not rest:
                self.bad_lines += 1
                continue
            samples.setdefault(name, []).append((labels, _float(rest[0])))

    def _type_line(self, line: str) -> None:
        parts = line.split()
        if len(parts) >= 4:
            family = parts[2]
            if self._names is None or family in self._names:
                self.types[family] = parts[3]


@dataclass(frozen=True)
class Scrape:
    """One parsed ``/metrics`` answer (only the families asked for)."""

    timestamp: float
    samples: dict[str, list[tuple[Labels, float]]] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    bytes: int = 0
    seconds: float = 0.0
    lines: int = 0
    error: str | None = None
    status: int | None = None  # HTTP status (403 means "not allowed", not "down")

    @property
    def ok(self) -> bool:
        return self.error is None

    def series(self, name: str) -> list[tuple[Labels, float]]:
        """Every (labels, value) of sample name ``name``."""
        return self.samples.get(name, [])

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


def parse_text(text: str | bytes, families: Iterable[str] | None = None) -> Scrape:
    """Parse a whole exposition at once (tests, saved scrapes, the benchmark)."""
    parser = MetricsParser(families)
    data = text.encode() if isinstance(text, str) else text
    for start in range(0, len(data), 1 << 16):
        parser.feed(data[start:start + (1 << 16)])
    parser.close()
    return Scrape(time.time(), parser.samples, parser.types, parser.bytes, 0.0, parser.lines)


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


class MetricsSource:
    """The one ``/metrics`` scrape every probe of a cluster shares.

    Probes declare the families they read with :meth:`want`; :meth:`scrape`
    returns the last scrape when it is fresh enough, joins one in flight, or
    starts a new one: never two at once.
    """

    #: Yield to the event loop after this many bytes of parsing.
    YIELD_EVERY_BYTES = 1 << 16

    def __init__(self, cluster: Cluster, families: Iterable[str] = ()) -> None:
        self.cluster = cluster
        self.families: set[str] = set(families)
        self.last: Scrape | None = None
        self.scrapes = 0
        self._inflight: asyncio.Task[Scrape] | None = None

    def want(self, *families: str) -> None:
        """Add families to keep (takes effect from the next scrape)."""
        self.families.update(families)

    async def scrape(self, max_age: float = 0.0) -> Scrape:
        """A scrape no older than ``max_age`` seconds; failures come back as ``Scrape.error``."""
        last = self.last
        if last is not None and time.time() - last.timestamp <= max_age:
            return last
        if self._inflight is None or self._inflight.done():
            self._inflight = asyncio.ensure_future(self._fetch())
        # shield: a cancelled waiter must not cancel the scrape other probes wait on.
        return await asyncio.shield(self._inflight)

    async def _fetch(self) -> Scrape:
        parser = MetricsParser(self.families)
        started = time.perf_counter()
        stamp = time.time()
        status = None
        try:
            async with self.cluster.client.stream("GET", "/metrics", headers={"Accept": "text/plain"}) as response:
                status = response.status_code
                if status != 200:
                    await response.aread()
                    message = status_message(response)
                    scrape = Scrape(stamp, error=f"/metrics answered {status}: {message}", status=status,
                                    seconds=time.perf_counter() - started)
                    self._keep(scrape)
                    return scrape
                since_yield = 0
                async for chunk in response.aiter_bytes(1 << 16):
                    parser.feed(chunk)
                    since_yield += len(chunk)
                    if since_yield >= self.YIELD_EVERY_BYTES:
                        since_yield = 0
                        await asyncio.sleep(0)  # keep keys answering during a 50 MB scrape
                parser.close()
        except httpx.HTTPError as exc:
            scrape = Scrape(stamp, error=explain(exc, self.cluster.server), status=status,
                            seconds=time.perf_counter() - started)
            self._keep(scrape)
            return scrape
        scrape = Scrape(stamp, parser.samples, parser.types, parser.bytes,
                        time.perf_counter() - started, parser.lines, status=status)
        self._keep(scrape)
        return scrape

    def _keep(self, scrape: Scrape) -> None:
        # Probes that need rates keep their own previous scrape: they run on different cadences.
        self.scrapes += 1
        self.last = scrape
