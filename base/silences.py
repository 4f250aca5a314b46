"""Accepted findings: ``[[silence]]`` entries of ``config.toml``, parsed, checked and matched.

An on-call team accepts a finding it knows about for a cluster, for a while, and says why::

    [[silence]]
    finding = "etcd-connections-per-crd"   # a finding's kind, or one whole id ("latency-slo:LIST cluster")
    cluster = "prod-*"                     # a glob over the context name; "*" is every cluster
    until = 2026-07-01T00:00:00Z           # an RFC 3339 time with its offset, or a date (through that day, UTC)
    why = "known on 1.26; upgrade planned (OPS-1234)"

The finding is still judged and shown, marked accepted with the why and until, but it does not
page: not in ``doctor``'s exit code, ``--fail-if 'findings.*'``, the TUI's critical status or the
exporter's alerting series.  At ``until`` the acceptance lapses and the finding pages again, with
no restart.  Every key is required: an acceptance without an end or a reason is how a known
problem is forgotten.  Whether ``finding`` names a finding crdscope has is checked where the
findings are declared (``findings.accepted.check_silences``); this module knows only the shape.
"""

from __future__ import annotations

import dataclasses
import datetime
import fnmatch
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .errors import ConfigError

#: The keys of one entry, all required.
KEYS = ("finding", "cluster", "until", "why")
#: A finding's kind: what a finding id holds before its first ``:``.
_KIND = re.compile(r"^[a-z0-9][a-z0-9-]*$")


@dataclasses.dataclass(frozen=True)
class Silence:
    """One accepted finding: which (kind or whole id), on which clusters (a glob), until when, why."""

    #: A finding kind (``memory-headroom``: every finding of that kind) or one id (``apf-rejecting:workload-low``).
    finding: str
    #: A shell-style glob over the cluster's context name (``*``, ``?``, ``[...]``; ``*`` also matches
    #: ``/`` and ``:``, as in an EKS ARN): ``prod-eu``, ``prod-*``, ``*``.
    cluster: str
    #: When it lapses: seconds since the epoch.
    until: float
    why: str

    @property
    def kind(self) -> str:
        """The finding kind it is about (the id before any ``:``)."""
        return self.finding.split(":", 1)[0]

    @property
    def whole_kind(self) -> bool:
        """True when it accepts every finding of its kind (not one id)."""
        return ":" not in self.finding

    def covers(self, finding_id: str, cluster: str, now: float) -> bool:
        """True when it accepts the finding ``finding_id`` of ``cluster`` at ``now``."""
        if now >= self.until or not fnmatch.fnmatchcase(cluster, self.cluster):
            return False
        return finding_id == self.finding or (self.whole_kind and finding_id.split(":", 1)[0] == self.finding)

    def applies_to(self, cluster: str, now: float) -> bool:
        """True when it accepts something of ``cluster`` at ``now``."""
        return now < self.until and fnmatch.fnmatchcase(cluster, self.cluster)

    @property
    def until_text(self) -> str:
        """``until`` in RFC 3339, UTC (``2026-07-01T00:00:00Z``)."""
        return rfc3339(self.until)

    def to_json(self) -> dict[str, Any]:
        return {"finding": self.finding, "cluster": self.cluster, "until": self.until_text,
                "until_timestamp": self.until, "why": self.why}

    @classmethod
    def from_json(cls, data: object) -> Silence | None:
        """Inverse of :meth:`to_json` (a collector's header, a recording); None when it does not read."""
        if not isinstance(data, dict):
            return None
        until = data.get("until_timestamp")
        if not isinstance(until, (int, float)) or isinstance(until, bool):
            return None
        return cls(finding=str(data.get("finding", "")), cluster=str(data.get("cluster", "")), until=float(until),
                   why=str(data.get("why", "")))


def rfc3339(timestamp: float) -> str:
    """Seconds since the epoch as an RFC 3339 UTC time, to the second."""
    moment = datetime.datetime.fromtimestamp(timestamp, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def covering(silences: Iterable[Silence], finding_id: str, cluster: str, now: float) -> Silence | None:
    """The acceptance of ``finding_id`` on ``cluster`` at ``now`` (the longest-lasting, when several
    cover it), or None: it pages."""
    found = [s for s in silences if s.covers(finding_id, cluster, now)]
    return max(found, key=lambda s: s.until) if found else None


def parse_silences(raw: object, path: Path) -> tuple[Silence, ...]:
    """``[[silence]]`` (or one ``[silence]`` table) from the parsed TOML; a one-line
    :class:`ConfigError` naming the entry otherwise."""
    entries = [raw] if isinstance(raw, dict) else raw
    if not isinstance(entries, list):
        raise ConfigError(f"{path}: [[silence]] must be tables (one [[silence]] per accepted finding)")
    return tuple(_entry(entry, number, path) for number, entry in enumerate(entries, start=1))


def _entry(entry: object, number: int, path: Path) -> Silence:
    if not isinstance(entry, dict):
        raise ConfigError(f"{path}: [[silence]] entry {number} must be a table, not {entry!r}")
    finding, cluster = entry.get("finding"), entry.get("cluster")
    where = f"{path}: [[silence]] entry {number} ({finding if isinstance(finding, str) and finding else '?'} " \
            f"on {cluster if isinstance(cluster, str) and cluster else '?'})"
    unknown = [key for key in entry if key not in KEYS]
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]} (keys: {', '.join(KEYS)})")
    missing = [key for key in KEYS if key not in entry]
    if missing:
        raise ConfigError(f"{where}: {' and '.join(missing)} missing (every entry needs {', '.join(KEYS)})")
    for key in ("finding", "cluster", "why"):
        value = entry[key]
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{where}: {key} must be a non-empty string, not {value!r}")
    if not _KIND.match(entry["finding"].split(":", 1)[0]):
        raise ConfigError(f"{where}: finding {entry['finding']!r} is not a finding kind or id "
                          "(e.g. memory-headroom or latency-slo:LIST cluster)")
    return Silence(finding=entry["finding"].strip(), cluster=entry["cluster"].strip(),
                   until=_until(entry["until"], where), why=" ".join(entry["why"].split()))


def _until(value: object, where: str) -> float:
    """An RFC 3339 time with its offset, or a date (the acceptance holds through that day, UTC)."""
    if isinstance(value, str):
        value = _parse_text(value.strip(), where)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            raise ConfigError(f"{where}: until {value.isoformat()} has no offset (add Z for UTC, or +02:00)")
        return value.timestamp()
    if isinstance(value, datetime.date):
        next_day = datetime.datetime.combine(value + datetime.timedelta(days=1), datetime.time(), datetime.UTC)
        return next_day.timestamp()
    raise ConfigError(f"{where}: until must be an RFC 3339 time (2026-07-01T00:00:00Z) or a date "
                      f"(2026-07-01), not {value!r}")


def _parse_text(text: str, where: str) -> datetime.datetime | datetime.date:
    try:
        if len(text) == 10:
            return datetime.date.fromisoformat(text)
        return datetime.datetime.fromisoformat(text.replace("z", "Z").replace("t", "T"))
    except ValueError:
        raise ConfigError(f"{where}: until {text!r} is not an RFC 3339 time (2026-07-01T00:00:00Z) "
                          "or a date (2026-07-01)") from None
