"""Typed settings from ``config.toml`` in the XDG config directory, overridable by flags.

Each section is a frozen dataclass; unknown keys and wrong types are one-line
errors naming the file, section and key.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .paths import config_file


@dataclasses.dataclass(frozen=True)
class Cadences:
    """Seconds between the end of one probe run and the start of the next."""

    version: float = 30.0
    inventory: float = 2.0
    discovery: float = 10.0
    #: The legacy walk sends 2+N requests: rarely, and when the set of group-versions changed.
    discovery_legacy: float = 300.0
    #: Throttling, health and latency share one /metrics scrape (megabytes on a big cluster, most of
    #: the monitor's bytes): 10 s keeps it under 50 KB/s with 2,000 CRDs (bench/RESULTS.md, overhead).
    throttling: float = 10.0
    openapi: float = 10.0
    #: Fetching /openapi/v2 makes the server build it: once a minute, only after a CRD change.
    openapi_v2: float = 60.0
    health: float = 10.0
    #: Four canary requests per run: every 15 s keeps the monitor under one request per second.
    latency: float = 15.0
    #: Reads the shared client's in-flight requests (no request of its own unless all is quiet).
    responsiveness: float = 0.5


@dataclasses.dataclass(frozen=True)
class Thresholds:
    """When a figure becomes a warning (events log, colours) in the monitor."""

    discovery_seconds_warn: float = 5.0
    openapi_backlog_warn: int = 50
    memory_mib_per_crd_warn: float = 3.0
    #: A request unanswered this long is the critical finding "API server not answering".
    unanswered_seconds_critical: float = 5.0
    #: APF rejections per second above which the APF finding is critical rather than a warning.
    apf_rejected_per_second_critical: float = 1.0
    #: Resident memory growth per minute (MiB) with no CRD added that makes a finding.
    memory_growth_mib_per_minute_warn: float = 50.0
    #: Resident memory over this fraction of a known limit is a warning (critical at 0.95).
    memory_limit_fraction_warn: float = 0.8
    #: Oldest CRD waiting for OpenAPI publication, seconds, that makes a finding.
    openapi_oldest_seconds_warn: float = 60.0
    #: CRDs with no objects, as a fraction of all CRDs (at least 100 of them), that makes a finding.
    unused_crds_fraction_info: float = 0.5


@dataclasses.dataclass(frozen=True)
class LoaderSettings:
    """Defaults of ``crdscope load`` and the monitor's loader panel."""

    source: str = "synthetic:300"
    rate: float = 20.0
    concurrency: int = 8
    profile: str = "steady"
    schema_props: int = 40


@dataclasses.dataclass(frozen=True)
class UISettings:
    theme: str = "crdscope-dark"
    record: bool = True


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything configurable, by section of ``config.toml``."""

    cadences: Cadences = Cadences()
    thresholds: Thresholds = Thresholds()
    loader: LoaderSettings = LoaderSettings()
    ui: UISettings = UISettings()
    prometheus_url: str | None = None

    def override(self, section: str, **values: Any) -> Settings:
        """A copy with some fields of one section replaced (flags win over the file)."""
        values = {k: v for k, v in values.items() if v is not None}
        if not values:
            return self
        current = getattr(self, section)
        return dataclasses.replace(self, **{section: dataclasses.replace(current, **values)})


def _coerce(section: str, cls: type, data: Any, path: Path) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: [{section}] must be a table")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values = {}
    for key, value in data.items():
        if key not in fields:
            raise ConfigError(f"{path}: unknown setting {section}.{key} (known: {', '.join(fields)})")
        default = fields[key].default
        expected = type(default) if default is not None and default is not dataclasses.MISSING else None
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if expected is not None and not isinstance(value, expected):
            raise ConfigError(f"{path}: {section}.{key} must be {expected.__name__}, not {value!r}")
        values[key] = value
    return cls(**values)


def load_settings(path: Path | None = None) -> Settings:
    """Read settings from ``path`` (default: the XDG config file); missing file = defaults."""
    path = path or config_file()
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Settings()
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    sections = {f.name: f.type for f in dataclasses.fields(Settings)}
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "prometheus_url":
            kwargs[key] = str(value)
            continue
        if key not in sections or key == "prometheus_url":
            raise ConfigError(f"{path}: unknown section [{key}] (known: {', '.join(sections)})")
        cls = type(getattr(Settings(), key))
        kwargs[key] = _coerce(key, cls, value, path)
    return Settings(**kwargs)
