"""An :class:`~.model.Estimate` as JSON (stable keys, units in names), a table or a Markdown card.

Plain text only: the costmodel layer never imports rich or textual.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .crossplane import Activation
from .model import ACTIVATION, Estimate, Interval

if TYPE_CHECKING:
    from crdscope.loader.oci import PackageSummary

MIB = float(1 << 20)
GIB = float(1 << 30)
#: The install path the model prices: CRDs created as ``crdscope load`` creates them, the path its
#: calibration measured (not MRD activation through Crossplane, which it has not calibrated).
PRICED_PATH = "direct"


def _interval(value: Interval, divisor: float = 1.0, digits: int = 1) -> dict[str, float]:
    return {"value": round(value.value / divisor, digits), "low": round(value.low / divisor, digits),
            "high": round(value.high / divisor, digits)}


def _activation_json(found: Activation | None) -> dict[str, Any] | None:
    if found is None:
        return None
    return {
        "namespaced_only": {"crds_left_out": found.cluster_crds,
                            "memory_saved_mib": round(found.cluster_memory_bytes / MIB, 1)},
        "cluster_scoped_only": {"crds_left_out": found.namespaced_crds,
                                "memory_saved_mib": round(found.namespaced_memory_bytes / MIB, 1)},
        "services": found.service_count,
        "costliest_services": [{"service": s.service, "crds": s.crds, "memory_mib": round(s.memory_bytes / MIB, 1)}
                               for s in found.services],
    }


def _delta_json(estimate: Estimate) -> dict[str, Any] | None:
    delta = estimate.delta
    if delta is None:
        return None
    return {"added": [crd.name for crd in delta.added], "removed": [crd.name for crd in delta.removed],
            "changed": [{"name": new.name, "schema_bytes_before": old.schema_bytes,
                         "schema_bytes_after": new.schema_bytes, "served_versions_before": list(old.served_versions),
                         "served_versions_after": list(new.served_versions)} for old, new in delta.changed]}


def _counts_json(e: Estimate) -> dict[str, Any]:
    """SOURCE's CRDs against the installed release (without one, every CRD is added)."""
    return {"installed_crds": len(e.delta.installed) if e.delta is not None else None,
            "crds_added": e.crds_added, "crds_removed": e.crds_removed, "crds_changed": e.crds_changed,
            "crds_unchanged": e.crds_unchanged,
            "schema_bytes_added": e.delta.schema_bytes_added if e.delta is not None else e.schema_bytes,
            "delta": _delta_json(e)}


def package_rows(packages: Sequence[PackageSummary], source: str) -> list[tuple[str, str]]:
    """What a package reference brought (the package, then its dependencies) and the path priced."""
    if not packages:
        return []
    first, *rest = packages
    rows = [("packages", first.describe() + (f"; depends on {'; '.join(p.describe() for p in rest)}" if rest else ""))]
    how = [f"{PRICED_PATH}: every CRD of the packages created at once, as `crdscope load` creates them (the path "
           "the model is calibrated on); through Crossplane v2 each Provider's CRDs come from its MRDs"]
    if any(p.safe_start for p in packages):
        how.append(f"a safe-start Provider's only once an MRAP activates them (`crdscope mrap --from {source}` "
                   "plans and prices the kinds its Compositions need)")
    xrds = sum(p.xrds for p in packages)
    if xrds:
        how.append(f"{xrds} XRD{'s' if xrds != 1 else ''} of a Configuration add{'s' if xrds == 1 else ''} "
                   f"a CRD{' each' if xrds != 1 else ''} (the composite kind), not priced here")
    return [*rows, ("priced path", ", ".join(how))]


def to_json(estimate: Estimate, *, source: str, activation: Activation | None = None,
            problems: int = 0, packages: Sequence[PackageSummary] = ()) -> dict[str, Any]:
    """The estimate as one JSON object; keys are stable and carry their unit.  With an installed
    release (``delta``) the ``*_added`` sizes are the delta's, net."""
    e = estimate
    return {
        "source": source,
        "priced_path": PRICED_PATH,
        "packages": [p.to_json() for p in packages],
        "kubernetes_minor_requested": e.minor_requested,
        "kubernetes_minor_model": e.minor_used,
        "model": e.model_note,
        "path": e.path,
        "path_note": e.path_note,
        "crds": e.crds,
        **_counts_json(e),
        "source_problems": problems,
        "served_versions": e.served_versions,
        "schema_bytes": e.schema_bytes,
        "memory": {
            "rss_added_mib": _interval(e.memory_bytes, MIB),
            "heap_added_mib": _interval(e.heap_bytes, MIB),
            "held_added_mib": _interval(e.live_heap_bytes, MIB) if e.live_heap_bytes else None,
            "rss_before_mib": round(e.rss_before_bytes / MIB, 1) if e.rss_before_bytes is not None else None,
            "rss_after_mib": _interval(e.rss_after_bytes, MIB) if e.rss_after_bytes else None,
            "limit_mib": round(e.memory_limit_bytes / MIB, 1) if e.memory_limit_bytes else None,
            "headroom_after_mib": round(e.headroom_bytes / MIB, 1) if e.headroom_bytes is not None else None,
            "crds_until_limit": e.crds_until_limit,
        },
        "discovery": {
            "groups_added": e.groups_added,
            "groups_removed": e.groups_removed,
            "group_versions_added": e.group_versions_added,
            "group_versions_removed": e.group_versions_removed,
            "resources_added": e.resources_added,
            "resources_removed": e.resources_removed,
            "aggregated_bytes_added": _rounded(e.aggregated_bytes_added),
            "aggregated_bytes_after": _rounded(e.aggregated_bytes_after),
            "legacy_requests_added": e.legacy_requests_added,
            "legacy_requests_after": e.legacy_requests_after,
            "legacy_walk_seconds": {walk.name: round(walk.seconds, 2) for walk in e.legacy_walks},
            "kubectl_cache_bytes_after": round(e.kubectl_cache_bytes_after),
        },
        "openapi": {"v3_paths_added": e.openapi_v3_paths_added, "v3_paths_removed": e.openapi_v3_paths_removed,
                    "v2_bytes_added": _interval(e.openapi_v2_bytes_added, 1.0, 0)},
        "install": _install_json(e),
        "etcd": {"connections_added": _interval(e.etcd_connections_added)},
        "top_crds": [{"name": c.name, "memory_mib": round(c.memory_bytes / MIB, 2),
                      "served_versions": c.served_versions, "schema_bytes": c.schema_bytes} for c in e.top_crds],
        "crossplane_activation": _activation_json(activation),
        "notes": list(e.notes),
    }


def _install_json(e: Estimate) -> dict[str, Any]:
    """How long the install takes: at the loader's defaults (a direct install), or from the MRAP's apply to
    every CRD Established (through Crossplane activation)."""
    activated = e.path == ACTIVATION
    return {"seconds_at_loader_defaults": None if activated else _interval(e.install_seconds),
            "seconds_after_mrap": _interval(e.install_seconds) if activated else None,
            "loader_pace_crds_per_second": e.install_pace_per_second,
            "pace_floor_seconds": round(e.crds_written / e.install_pace_per_second, 1)
            if e.install_pace_per_second else None}


def _install_row(e: Estimate) -> tuple[str, str]:
    if e.path == ACTIVATION:
        return ("activation time", f"{_range(e.install_seconds, 's')} from the MRAP's apply to every CRD Established")
    pace = e.install_pace_per_second
    return ("install time", f"{_range(e.install_seconds, 's')} at the loader's defaults"
            + (f" ({pace:g} CRDs/s: never under {e.crds_written / pace:.0f} s)" if pace else ""))


def _size(value: float) -> str:
    if abs(value) >= GIB:
        return f"{value / GIB:.2f} GiB"
    if abs(value) >= MIB:
        return f"{value / MIB:.0f} MiB"
    return f"{value / 1024:.0f} KiB"


def _range(value: Interval, unit: str = "bytes") -> str:
    if unit == "bytes":
        return f"{_size(value.value)} ({_size(value.low)} to {_size(value.high)})"
    return f"{value.value:.0f} {unit} ({value.low:.0f} to {value.high:.0f})"


def _delta_rows(e: Estimate) -> list[tuple[str, str]]:
    """What SOURCE changes of the release the cluster runs (nothing when not compared with one)."""
    if e.delta is None:
        return []
    net = e.delta.schema_bytes_added
    return [("against the installed", f"{len(e.delta.installed)} CRDs there: adds {e.crds_added}, removes "
                                      f"{e.crds_removed}, changes {e.crds_changed}, leaves {e.crds_unchanged} as they "
                                      f"are (schemas {'+' if net >= 0 else '-'}{_size(abs(net))}); the figures below "
                                      "are the delta's")]


def lines(estimate: Estimate, *, source: str, activation: Activation | None = None,
          packages: Sequence[PackageSummary] = ()) -> list[tuple[str, str]]:
    """(label, value) rows shared by the table and the Markdown card."""
    e = estimate
    rows = [
        ("source", f"{source}: {e.crds} CRDs, {e.served_versions} served versions, schemas {_size(e.schema_bytes)}"),
        *package_rows(packages, source),
        ("model", e.model_note),
        ("priced as", e.path_note),
        *_delta_rows(e),
        ("API-server memory added", _range(e.memory_bytes)),
        ("Go heap added", _range(e.heap_bytes)),
        ("memory held by the CRDs", f"{_range(e.live_heap_bytes)} (Go heap after a collection)" if e.live_heap_bytes
         else f"not calibrated on {e.minor_used} (heap after a forced collection)"),
    ]
    if e.rss_after_bytes is not None and e.rss_before_bytes is not None:
        rows.append(("RSS after", f"{_range(e.rss_after_bytes)} (before: {_size(e.rss_before_bytes)})"))
    if e.memory_limit_bytes is not None and e.headroom_bytes is not None:
        verdict = (f"headroom {_size(e.headroom_bytes)}" if e.headroom_bytes >= 0
                   else f"OVER the limit by {_size(-e.headroom_bytes)}")
        rows.append(("memory limit", f"{_size(e.memory_limit_bytes)}: {verdict}; the API server would be "
                                     f"OOM-killed after about {e.crds_until_limit} CRDs like these"))
    rows += [
        ("discovery added", f"{e.groups_added} groups, {e.group_versions_added} group-versions, "
                            f"{e.resources_added} resources" + (
                                f"; removed {e.groups_removed} groups, {e.group_versions_removed} group-versions, "
                                f"{e.resources_removed} resources" if e.delta is not None else "")),
        ("aggregated discovery", f"+{_size(e.aggregated_bytes_added)} ({_size(e.aggregated_bytes_after)} after)"
         if e.aggregated_bytes_added is not None and e.aggregated_bytes_after is not None
         else f"not served by default on {e.minor_requested}: clients walk the legacy endpoints"),
        ("legacy discovery walk", f"{e.legacy_requests_after} requests (+{e.legacy_requests_added}): "
         + ", ".join(f"{w.name} ({w.qps:g}/{w.burst}) {w.seconds:.1f} s" for w in e.legacy_walks)),
        ("kubectl cache", _size(e.kubectl_cache_bytes_after)),
        ("OpenAPI", f"+{e.openapi_v3_paths_added} v3 paths, v2 document +{_range(e.openapi_v2_bytes_added)}"),
        _install_row(e),
        # No "at the server's establish rate" beside it: that rate was measured on the paced
        # calibration installs, so it is the loader's pace again and contradicted the figure above.
        ("etcd connections added", f"{e.etcd_connections_added.value:.0f}"),
    ]
    rows += [(f"top {index}", f"{c.name}: {_size(c.memory_bytes)} ({c.served_versions} versions, "
                              f"schema {_size(c.schema_bytes)})") for index, c in enumerate(e.top_crds, 1)]
    if activation is not None:
        rows.append(("activate namespaced only", f"saves {_size(activation.cluster_memory_bytes)} "
                                                 f"({activation.cluster_crds} cluster-scoped CRDs left out)"))
        rows.append(("activate cluster-scoped only", f"saves {_size(activation.namespaced_memory_bytes)} "
                                                     f"({activation.namespaced_crds} namespaced CRDs left out)"))
        rows += [(f"without {s.service}", f"saves {_size(s.memory_bytes)} ({s.crds} CRDs)")
                 for s in activation.services]
    rows += [("note", note) for note in e.notes if note != e.model_note]
    return rows


def to_table(estimate: Estimate, *, source: str, activation: Activation | None = None,
             packages: Sequence[PackageSummary] = ()) -> str:
    """A readable two-column table."""
    rows = lines(estimate, source=source, activation=activation, packages=packages)
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label.ljust(width)}  {value}" for label, value in rows)


def to_markdown(estimate: Estimate, *, source: str, activation: Activation | None = None,
                packages: Sequence[PackageSummary] = ()) -> str:
    """A footprint card a provider maintainer could publish with a release."""
    rows = lines(estimate, source=source, activation=activation, packages=packages)
    body = "\n".join(f"| {label} | {value.replace('|', '/')} |" for label, value in rows)
    return (f"### API-server footprint of {source}\n\n| figure | predicted |\n|---|---|\n{body}\n\n"
            f"Predicted by `crdscope estimate` ({estimate.model_note}); intervals are twice the calibration's "
            f"relative RMS error, at least 10%.\n")


def _rounded(value: float | None) -> int | None:
    return None if value is None else round(value)
