"""Typed settings from ``config.toml`` in the XDG config directory, overridable by flags.

Each section is a frozen dataclass; unknown keys and wrong types are one-line
errors naming the file, section and key.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .paths import config_file
from .silences import Silence, parse_silences


@dataclasses.dataclass(frozen=True)
class Cadences:
    """Seconds between the end of one probe run and the start of the next, as ``config.toml`` sets them.

    Each probe declares its own cadences beside what they cost the server (``pacing`` in its module,
    e.g. ``probes/discovery.py``; the budgets those costs must stay within too, ``bench/RESULTS.md``,
    footprint, for the figures).  A key here left unset (None) keeps the probe's declaration; one
    set replaces it: ``<probe>`` the busy cadence, ``<probe>_idle`` the idle one (used once no CRD
    changed for ``settle`` seconds).  The other keys pace reads inside a probe, and are set here.
    """

    version: float | None = None
    version_idle: float | None = None
    inventory: float | None = None
    discovery: float | None = None
    discovery_idle: float | None = None
    throttling: float | None = None
    throttling_idle: float | None = None
    openapi: float | None = None
    openapi_idle: float | None = None
    health: float | None = None
    health_idle: float | None = None
    latency: float | None = None
    latency_idle: float | None = None
    responsiveness: float | None = None
    webhooks: float | None = None
    webhooks_idle: float | None = None
    #: The inventory's Crossplane install chain (connection/crossplane_read.py): one list each of
    #: Providers, ProviderRevisions, MRDs (a Table without objects, one request per 2,000) and MRAPs,
    #: only for the APIs whose CRDs exist, from the watch cache (resourceVersion=0); a Node list of
    #: one item at most every 10 min, only while a provider's Deployment is not Available.  At most
    #: every ``crossplane`` s after a CRD change (an install: 8 requests/min, 10 past 2,000 MRDs),
    #: else every ``crossplane_idle`` s (2/min: at rest the whole monitor stays under 0.5 requests/s
    #: with Crossplane too).  Budget: the inventory probe's.
    crossplane: float = 30.0
    crossplane_idle: float = 120.0
    #: The legacy walk sends 2+N requests (480 at the whole AWS set): on a server without aggregated
    #: discovery (the only way to see resources there) every this many seconds, and after the set of
    #: group-versions changed once it has been still for ``settle`` seconds, never during an install
    #: (budget: ``legacy_walks_per_hour``) ...
    discovery_legacy: float = 300.0
    #: ... and on a server with aggregated discovery, where the walk only measures what a legacy
    #: client pays, after such a change and otherwise as rarely as kubectl's cache expires (6 h):
    #: every 300 s was 1.6 requests/s on average at 2,065 CRDs, three times all the rest of the
    #: monitor at rest.
    discovery_legacy_refresh: float = 21600.0
    #: Fetching /openapi/v2 makes the server build the whole document (43 s and 100 MB at 2,065
    #: CRDs, and the Go heap keeps the memory): off unless asked (``--openapi-v2``: 60, once a
    #: minute at most and only after a CRD change).
    openapi_v2: float = 0.0
    #: One HTTP/2 PING on a connection of its own every this many seconds: no request, no APF seat,
    #: about 100 bytes each way (0: off; then, as where the server cannot be pinged, a /livez
    #: heartbeat after 2 s of silence, 4 s once all is quiet).
    responsiveness_ping: float = 1.0
    #: Seconds without a CRD change after which an install counts as over: probes with an idle
    #: cadence use it from then on (a CRD change brings the busy one back at once), and the legacy
    #: walk runs again.
    settle: float = 60.0
    #: Seconds the latency probe's p99s span (the server's histograms between two scrapes this far
    #: apart, the canaries' rolling percentiles): the Kubernetes SLOs' 5 minutes.  A shorter window
    #: closes a latency-slo finding sooner once a stall is over, and judges fewer requests.
    latency_window: float = 300.0

    def overrides(self) -> dict[str, float]:
        """The keys set (``config.toml``, flags, a collector's stream): name -> seconds."""
        return _set_values(self)


@dataclasses.dataclass(frozen=True)
class RequestBudgets:
    """Requests per minute each part of the monitor may send, averaged over five minutes.

    The footprint probe names a part over its budget, and the CI test
    (``tests/e2e/test_footprint.py``) fails a default watch that exceeds one during a load.
    Parts are the scheduler's probes, each declaring its own budget (``pacing`` in its module:
    a key set here replaces it), plus ``metrics`` (the one shared /metrics scrape), ``crd-watch``
    (the one CRD list+watch) and ``discovery-walk`` (budgeted in walks per hour: its requests grow
    with the group-versions).
    """

    version: float | None = None
    inventory: float | None = None
    discovery: float | None = None
    throttling: float | None = None
    openapi: float | None = None
    health: float | None = None
    latency: float | None = None
    responsiveness: float | None = None
    webhooks: float | None = None
    #: /openapi/v3/<group-version> documents read to settle publication stages.
    openapi_v3_documents: float = 6.0
    metrics: float = 6.0
    crd_watch: float = 2.0
    legacy_walks_per_hour: float = 12.0
    #: The CRD list+watch asks for protobuf, the encoding the server's own controllers watch in:
    #: far less work for the server than marshalling every CRD to JSON (bench/RESULTS.md, footprint).
    #: false: JSON, for a proxy in between that cannot pass protobuf (a server that cannot answers JSON anyway).
    crd_watch_protobuf: bool = True
    #: After the CRD watch found its stream drained it pauses this long, so that an install's events
    #: are read back to back rather than one wake-up each: under half the watch's CPU on a machine
    #: shared with the server (bench/RESULTS.md, footprint), each event seen at most this much later.
    #: 0: read every event as it arrives.
    crd_watch_coalesce_seconds: float = 0.25

    def overrides(self) -> dict[str, float]:
        """The numeric keys set: name -> requests per minute (or the key's own unit)."""
        return _set_values(self)


def _set_values(section: Cadences | RequestBudgets) -> dict[str, float]:
    """A section's numeric values that are set (not None, not a switch)."""
    return {name: float(value) for name, value in dataclasses.asdict(section).items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)}


@dataclasses.dataclass(frozen=True)
class Thresholds:
    """When a figure becomes a warning (events log, colours) in the monitor."""

    discovery_seconds_warn: float = 5.0
    openapi_backlog_warn: int = 50
    #: Memory per CRD (MiB, the least-squares fit of resident memory against the CRD count) that
    #: makes a finding ...
    memory_mib_per_crd_warn: float = 3.0
    #: ... judged only when the least-squares fit of memory against CRDs explains this much (R²).
    memory_fit_r2_min: float = 0.8
    #: A request unanswered this long is the critical finding "API server not answering".
    unanswered_seconds_critical: float = 5.0
    #: An HTTP/2 PING (or a connection opened for one) unanswered this long is that finding too: the
    #: server answers PINGs in milliseconds even on a busy 2-core lab (bench/RESULTS.md, hang detection).
    ping_unanswered_seconds_critical: float = 2.5
    #: APF rejections per second above which the APF finding is critical rather than a warning.
    apf_rejected_per_second_critical: float = 1.0
    #: Resident memory growth per minute (MiB) with no CRD added that makes a finding.
    memory_growth_mib_per_minute_warn: float = 50.0
    #: Resident memory over this fraction of a known limit is a warning ...
    memory_limit_fraction_warn: float = 0.8
    #: ... and over this fraction a critical finding.
    memory_limit_fraction_critical: float = 0.95
    #: Oldest CRD waiting for OpenAPI publication, seconds, that makes a finding.
    openapi_oldest_seconds_warn: float = 60.0
    #: CRDs with no objects, as a fraction of all CRDs (at least 100 of them), that makes a finding.
    unused_crds_fraction_info: float = 0.5
    #: Active MRDs of one provider with no objects that open the Crossplane unused-kinds finding.
    crossplane_unused_mrds_info: int = 5
    #: This many API server restarts within ``crashloop_window_seconds`` are one critical
    #: "crash-looping" finding (a kubelet's CrashLoopBackOff needs fewer; three rule out a one-off) ...
    crashloop_restarts: int = 3
    crashloop_window_seconds: float = 600.0
    #: ... which stays open through later restarts and closes once the server has served this long
    #: with no restart (a back-off of 5 minutes would otherwise close it between two deaths).
    crashloop_quiet_seconds: float = 300.0


@dataclasses.dataclass(frozen=True)
class LoaderSettings:
    """Defaults of ``crdscope load`` and the monitor's loader panel."""

    source: str = "synthetic:300"
    rate: float = 20.0
    concurrency: int = 8
    profile: str = "steady"
    schema_props: int = 40


@dataclasses.dataclass(frozen=True)
class RulesSettings:
    """``crdscope rules``: what the generated alerting rules link to."""

    #: Where the runbook is: each rule's ``runbook_url`` annotation is this plus ``#<finding kind>``.
    #: The default is the page the project ships (``docs/runbook.md`` in its repository), relative:
    #: set it to where your team publishes that page (``--runbook-url`` wins over it).
    runbook_url: str = "docs/runbook.md"


@dataclasses.dataclass(frozen=True)
class UISettings:
    theme: str = "crdscope-dark"
    record: bool = True


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything configurable, by section of ``config.toml``."""

    cadences: Cadences = Cadences()
    budgets: RequestBudgets = RequestBudgets()
    thresholds: Thresholds = Thresholds()
    loader: LoaderSettings = LoaderSettings()
    ui: UISettings = UISettings()
    rules: RulesSettings = RulesSettings()
    prometheus_url: str | None = None
    #: Accepted findings (``[[silence]]``): judged and shown, not paged on, until each lapses.
    silences: tuple[Silence, ...] = ()

    def override(self, section: str, **values: Any) -> Settings:
        """A copy with some fields of one section replaced (flags win over the file)."""
        values = {k: v for k, v in values.items() if v is not None}
        if not values:
            return self
        current = getattr(self, section)
        return dataclasses.replace(self, **{section: dataclasses.replace(current, **values)})


#: The /openapi/v2 cadence ``--openapi-v2`` turns on when the settings leave it off.
OPENAPI_V2_WHEN_ASKED = 60.0


def with_openapi_v2(settings: Settings, asked: bool) -> Settings:
    """``settings`` with /openapi/v2 measured when ``asked`` (``--openapi-v2``) and the file leaves it off."""
    if asked and settings.cadences.openapi_v2 <= 0:
        return settings.override("cadences", openapi_v2=OPENAPI_V2_WHEN_ASKED)
    return settings


#: Settings whose value must lie in a range: (section, key) -> (lowest, highest).
RANGES: dict[tuple[str, str], tuple[float, float]] = {
    # A longer pause lets a whole install's events pile up in the socket and the server's buffer
    # for this watcher (a watcher that falls behind is closed by the server).
    ("budgets", "crd_watch_coalesce_seconds"): (0.0, 2.0),
}


def _expected_type(field: dataclasses.Field[Any]) -> type | None:
    """The type a key's value must have: its default's, or for a key unset by default (None) the
    one its annotation names (``float | None``)."""
    default = field.default
    if default is not None and default is not dataclasses.MISSING:
        return type(default)
    annotation = str(field.type)
    return next((kind for kind in (float, int, bool, str) if annotation.startswith(kind.__name__)), None)


def _coerce(section: str, cls: type, data: Any, path: Path) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: [{section}] must be a table")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values = {}
    for key, value in data.items():
        if key not in fields:
            raise ConfigError(f"{path}: unknown setting {section}.{key} (known: {', '.join(fields)})")
        expected = _expected_type(fields[key])
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if expected is not None and not isinstance(value, expected):
            raise ConfigError(f"{path}: {section}.{key} must be {expected.__name__}, not {value!r}")
        if (section, key) in RANGES:
            lowest, highest = RANGES[section, key]
            if not lowest <= value <= highest:
                raise ConfigError(f"{path}: {section}.{key} must be between {lowest:g} and {highest:g}, not {value!r}")
        values[key] = value
    return cls(**values)


def load_settings(path: Path | None = None) -> Settings:
    """Read settings from ``path`` (default: the XDG config file); missing file = defaults."""
    import tomllib  # only where a file is read: a probe built on the defaults (crdscope probe) reads none

    path = path or config_file()
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Settings()
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    sections = [f.name for f in dataclasses.fields(Settings) if f.name not in ("prometheus_url", "silences")]
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "prometheus_url":  # the one top-level key that is no section
            if not isinstance(value, str):
                raise ConfigError(f"{path}: prometheus_url must be a string (a URL), not {value!r}")
            kwargs[key] = value
            continue
        if key == "silence":  # [[silence]]: entries, not a section of settings
            kwargs["silences"] = parse_silences(value, path)
            continue
        if key not in sections:
            raise ConfigError(f"{path}: unknown section [{key}] (known: {', '.join([*sections, 'silence'])})")
        cls = type(getattr(Settings(), key))
        kwargs[key] = _coerce(key, cls, value, path)
    return Settings(**kwargs)
