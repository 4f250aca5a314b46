"""What ``crdscope probe NAME`` prints for a person: figures with units, small aligned tables.

Works on a sample's ``to_json()`` dict (the same data ``--json`` prints), so a
recorded sample renders the same way.  Discovery, health and throttling get
summaries chosen for what a person asks of them, inventory the generic figures and then
Crossplane's install chain as tables; every other probe gets the generic rendering: one
aligned line per figure, formatted by the unit its key names (``*_seconds``, ``*_bytes``,
``*_per_s``, timestamps as "3m ago"), lists of records as tables.  No colour: output may go to a file or a pipe.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from crdscope.tui.format import DASH, age, duration, missing, number, rate, size

#: Rows a table shows before it says how many it left out.
TABLE_ROWS = 10


# --------------------------------------------------------------------------- building blocks


def ago(timestamp: float | None, now: float | None = None) -> str:
    """``3m05s ago`` for a Unix time (a dash when missing)."""
    if timestamp is None or missing(timestamp):
        return DASH
    return f"{age((now or time.time()) - float(timestamp))} ago"


def words(key: str) -> str:
    """A field name as a label, its unit said in words: ``gv_p95_seconds`` -> ``gv p95 time``."""
    for suffix, word in (("_seconds", " time"), ("_bytes", " size"), ("_per_s", " rate")):
        if key.endswith(suffix):
            key = key[: -len(suffix)] + word
    return key.replace("_", " ")


def figure(key: str, value: Any, now: float | None = None) -> str:
    """One value formatted by the unit its key names."""
    if missing(value) or value == "":
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or DASH
    if isinstance(value, dict):
        return ", ".join(f"{k} {figure(key, v, now)}" for k, v in value.items()) or DASH
    if not isinstance(value, (int, float)):
        return str(value)
    if key == "timestamp" or key.endswith(("_timestamp", "_at")) or key in ("start_time", "start", "end"):
        return ago(value, now)
    if key == "seconds" or key.endswith("_seconds"):
        return duration(value)
    if key in ("bytes", "wire_bytes") or key.endswith("_bytes"):
        return size(value)
    if key.endswith("_per_s"):
        return rate(value)
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else number(value)
    return number(value)


def pairs(items: Iterable[tuple[str, str | None]], indent: str = "  ") -> list[str]:
    """``label  value`` lines with the values aligned (a None value leaves its line out)."""
    kept = [(label, value) for label, value in items if value is not None]
    width = max((len(label) for label, _ in kept), default=0)
    return [f"{indent}{label.ljust(width)}  {value}" for label, value in kept]


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, indent: str = "  ",
          limit: int = TABLE_ROWS, align: str = "") -> list[str]:
    """An aligned table; ``align`` has an ``l`` or ``r`` per column (default: the first column
    left-aligned, the others, figures, right-aligned)."""
    shown = list(rows[:limit])
    widths = [max([len(headers[i]), *(len(row[i]) for row in shown)]) for i in range(len(headers))]
    align = align or "l" + "r" * (len(headers) - 1)

    def line(cells: Sequence[str]) -> str:
        parts = [cell.ljust(width) if side == "l" else cell.rjust(width)
                 for cell, width, side in zip(cells, widths, align, strict=True)]
        return (indent + "  ".join(parts)).rstrip()

    lines = [line(headers), *(line(row) for row in shown)]
    if len(rows) > limit:
        lines.append(f"{indent}... and {len(rows) - limit} more")
    return lines


def unobservable(reasons: dict[str, str]) -> list[str]:
    """The figures the server does not offer, each with its reason in words."""
    if not reasons:
        return []
    grouped: dict[str, list[str]] = {}
    for key, reason in reasons.items():
        grouped.setdefault(reason, []).append(words(key))
    return ["", "not observable here:", *(f"  {', '.join(keys)}: {reason}" for reason, keys in grouped.items())]


def _header(name: str, data: dict[str, Any], now: float | None) -> list[str]:
    server = data.get("server")
    where = f" on {server}" if server else ""
    lines = [f"{name}{where}, {ago(data.get('timestamp'), now)}"]
    if data.get("error"):
        lines.append(f"  error: {data['error']}")
    return lines


# --------------------------------------------------------------------------- per probe


def render_discovery(data: dict[str, Any], now: float | None = None) -> list[str]:
    """Discovery: counts, cost of the run, the legacy walk and what clients would wait."""
    lines = _header("discovery", data, now)
    mode = data.get("mode") or DASH
    if data.get("format") and data["format"] != data.get("mode"):
        mode += f" ({data['format']})"
    lines += pairs([
        ("mode", mode),
        ("fell back because", data.get("fallback_reason") or None),
        ("group-versions", number(data.get("group_versions"))),
        ("resources", number(data.get("resources"))),
        ("took", f"{duration(data.get('seconds'))} for {number(data.get('requests'))} requests, "
                 f"{size(data.get('bytes'))} decoded ({size(data.get('wire_bytes'))} on the wire)"),
        ("not modified", number(data.get("not_modified")) if data.get("not_modified") else None),
        ("stale", figure("stale", data.get("stale_group_versions")) if data.get("stale_group_versions") else None),
        ("failed", str(len(data["failed_group_versions"])) if data.get("failed_group_versions") else None),
        ("changed", f"+{len(data.get('appeared') or ())} -{len(data.get('vanished') or ())}"
                    if data.get("changed") else None),
    ])
    if data.get("walk_seconds") is not None:
        lines += ["", f"legacy walk ({ago(data.get('walk_timestamp'), now)}):"]
        lines += pairs([
            ("took", f"{duration(data.get('walk_seconds'))} for {number(data.get('walk_requests'))} requests, "
                     f"{size(data.get('walk_bytes'))}"),
            ("per group-version", f"p50 {duration(data.get('gv_p50_seconds'))}, "
                                  f"p95 {duration(data.get('gv_p95_seconds'))}, "
                                  f"max {duration(data.get('gv_max_seconds'))}"),
        ])
    if data.get("slowest"):
        lines += ["", "slowest group-versions:"]
        lines += table(["group-version", "GET"],
                       [[row["group_version"], duration(row["seconds"])] for row in data["slowest"]])
    if data.get("client_models"):
        lines += ["", "what a client would wait for the same walk:"]
        lines += table(["client", "qps", "burst", "walk", "throttled"],
                       [[m["name"], figure("qps", m["qps"]), number(m["burst"]), duration(m["seconds"]),
                         duration(m["waited_seconds"])] for m in data["client_models"]])
    for key in ("kubectl_cache", "kubectl"):
        if isinstance(data.get(key), dict):
            lines += ["", f"{words(key)}:", *pairs((words(k), figure(k, v, now)) for k, v in data[key].items())]
    return lines + unobservable(data.get("unobservable") or {})


def render_health(data: dict[str, Any], now: float | None = None) -> list[str]:
    """Health: readiness, memory, file descriptors, storage, restarts, outages, the memory fit."""
    lines = _header("health", data, now)
    failing = ", ".join(data.get("failing_checks") or ()) or None
    fds = None
    if data.get("open_fds") is not None:
        fds = number(data["open_fds"]) + (f" of {number(data['max_fds'])}" if data.get("max_fds") else "")
    fit = None
    if data.get("mib_per_crd") is not None:
        fit = (f"{data['mib_per_crd']:.2f} MiB per CRD (r² {figure('r2', data.get('r2'))}, "
               f"{data.get('fit_points', 0)} points at {data.get('fit_crd_counts', 0)} CRD counts)")
    started = data.get("start_time")
    lines += pairs([
        ("ready", figure("ready", data.get("ready")) + (f" (failing: {failing})" if failing else "")),
        ("live", figure("live", data.get("live"))),
        ("down now", "yes" if data.get("down") else None),
        ("resident memory", size(data.get("rss_bytes"))),
        ("Go heap", size(data.get("heap_bytes"))),
        ("pod working set", size(data["working_set_bytes"]) if data.get("working_set_bytes") is not None else None),
        ("goroutines", number(data.get("goroutines"))),
        ("open files", fds),
        ("etcd connections", number(data["etcd_connections"]) if data.get("etcd_connections") is not None
         else None),
        ("started", f"{ago(started, now)}" if started else None),
        ("restarts", number(data.get("restarts"))),
        ("CRDs", number(data.get("crds"))),
        ("memory per CRD", fit),
        ("objects in storage", number(data.get("storage_objects_total"))),
        ("storage size", size(data["storage_size_bytes"]) if data.get("storage_size_bytes") is not None else None),
    ])
    stored = [(name, count) for name, count in (data.get("storage_objects_top") or {}).items() if count]
    if stored:
        lines += ["", "most objects:"]
        lines += table(["resource", "objects"], [[name, number(count)] for name, count in stored])
    if data.get("outages"):
        lines += ["", "outages:"]
        lines += table(["started", "lasted", "reason"],
                       [[ago(o["start"], now), "ongoing" if o.get("end") is None else duration(o["duration_seconds"]),
                         o.get("reason") or ""] for o in data["outages"]])
    if data.get("sources"):
        lines += ["", "from elsewhere:", *pairs((words(k), v) for k, v in data["sources"].items())]
    return lines + unobservable(data.get("unobservable") or {})


def render_throttling(data: dict[str, Any], now: float | None = None) -> list[str]:
    """Throttling: APF priority levels, 429s crdscope met, and client-side limits."""
    lines = _header("throttling", data, now)
    answers = data.get("responses_429") or {}
    limiter = data.get("client_limiter")
    lines += pairs([
        ("window", duration(data["interval_seconds"]) if data.get("interval_seconds") else "one scrape (no rates)"),
        ("rejected by the server", rate(data.get("rejected_per_s"))),
        ("429s crdscope received", f"{number(answers.get('total', 0))} "
                                   f"({number(answers.get('since_last_run', 0))} since the last run)"),
        ("loader's limiter", None if not limiter else
         f"{figure('qps', limiter['qps'])} qps, burst {limiter['burst']}: {number(limiter['throttled'])} of "
         f"{number(limiter['acquired'])} requests waited, {duration(limiter['waited_seconds'])} in all"),
        ("scrape", f"{size(data.get('scrape_bytes'))} in {duration(data.get('scrape_seconds'))}"),
    ])
    levels = data.get("priority_levels") or []
    if levels:
        lines += ["", "priority levels (busiest first):"]
        ordered = sorted(levels, key=lambda p: (-(p.get("executing_seats") or 0) - (p.get("inqueue") or 0),
                                                p["name"]))
        lines += table(
            ["level", "type", "seats", "limit", "queued", "dispatched", "rejected", "wait p99"],
            [[p["name"], p.get("limit_response") or DASH, number(p.get("executing_seats")),
              number(p.get("limit_seats")), number(p.get("inqueue")), rate(p.get("dispatched_per_s")),
              rate(p.get("rejected_per_s")), duration(p.get("wait_p99_seconds"))] for p in ordered],
            limit=len(ordered),
        )
    if data.get("own_flows"):
        lines += ["", "where the server put crdscope's requests:"]
        lines += table(["flow schema", "priority level", "answers"],
                       [[f.get("flow_schema") or DASH, f.get("priority_level") or DASH, number(f["responses"])]
                        for f in data["own_flows"]])
    if answers.get("recent"):
        lines += ["", "latest 429s:"]
        lines += table(["when", "request", "retry after", "priority level"],
                       [[ago(r["timestamp"], now), f"{r['method']} {r['path']}", duration(r.get("retry_after_seconds")),
                         r.get("priority_level") or DASH] for r in answers["recent"]])
    if data.get("client_models"):
        lines += ["", "client models:"]
        lines += table(["client", "qps", "burst", "walk", "throttled"],
                       [[m["name"], figure("qps", m["qps"]), number(m["burst"]), duration(m["seconds"]),
                         duration(m["waited_seconds"])] for m in data["client_models"]])
    return lines + unobservable(data.get("unobservable") or {})


def render_inventory(data: dict[str, Any], now: float | None = None) -> list[str]:
    """Inventory: the generic figures, then Crossplane's install chain as tables."""
    chain = data.get("crossplane") or {}
    lines = render_generic("inventory", {k: v for k, v in data.items() if k != "crossplane"}, now)
    if not chain.get("present"):
        return lines
    lines += ["", f"crossplane (read {ago(chain.get('read_at'), now)}):"]
    providers = chain.get("providers") or []
    if providers:
        lines += table(
            ["provider", "package", "revision", "MRDs active", "inactive", "CRDs", "established", "expected",
             "rate", "ETA", "runtime"],
            [[p["name"], p.get("package") or DASH, _revision_text(p.get("revisions") or []),
              number(p.get("mrds_active")), number(p.get("mrds_inactive")), number(p.get("crds")),
              number(p.get("crds_established")), number(p.get("expected_crds")),
              rate(p.get("per_minute"), "/min") if p.get("per_minute") else DASH,
              _eta_text(p),
              p.get("runtime") or DASH] for p in providers],
            align="lllrrrrrrll", limit=len(providers))
        for p in providers:
            notes = [("runtime", p.get("runtime_note")), ("healthy", p.get("healthy_message")),
                     ("active MRDs", _names(p.get("active_mrd_names"), p.get("mrds_active"))),
                     ("inactive MRDs", _names(p.get("inactive_mrd_names"), p.get("mrds_inactive")))]
            kept = [(label, text) for label, text in notes if text]
            if kept:
                lines += ["", f"  {p['name']}:", *pairs(kept, indent="    ")]
    for revision in chain.get("orphan_revisions") or []:
        lines.append(f"  revision {revision['name']} (r{revision.get('revision')}): no Provider claims it")
    if chain.get("mrds_unattributed"):
        lines.append(f"  {number(chain['mrds_unattributed'])} MRDs not listed by any revision (yet)")
    mraps = chain.get("mraps") or []
    if mraps:
        lines += ["", "activation policies:"]
        lines += table(["MRAP", "patterns", "activated", "matching", "still inactive", "healthy"],
                       [[m["name"], ", ".join(m.get("patterns") or ()) or DASH, number(m.get("activated")),
                         number(m.get("matching")), number(m.get("matching_inactive")),
                         m.get("healthy") or DASH] for m in mraps], align="llrrrl", limit=len(mraps))
    summary = _runtimes_summary(chain)
    if summary or chain.get("has_nodes") is not None:
        nodes = None if chain.get("has_nodes") is None else ("yes" if chain["has_nodes"] else "none")
        lines += ["", *pairs([("nodes", nodes), ("runtimes", summary or None)])]
    return lines + unobservable(chain.get("unobservable") or {})


def _runtimes_summary(chain: dict[str, Any]) -> str:
    """:func:`base.crossplane.runtimes_summary` of a chain as JSON."""
    from crdscope.base.crossplane import CrossplaneChain, ProviderChain, runtimes_summary

    providers = tuple(ProviderChain(name=p.get("name", ""), owner="", runtime=p.get("runtime") or "unknown")
                      for p in chain.get("providers") or [])
    return runtimes_summary(CrossplaneChain(present=True, providers=providers, has_nodes=chain.get("has_nodes")))


def _eta_text(provider: dict[str, Any]) -> str:
    """The install ETA, "done" once every expected CRD is Established, else why there is none."""
    if provider.get("eta_seconds") is not None:
        return duration(provider["eta_seconds"])
    expected = provider.get("expected_crds")
    if expected is not None and (provider.get("crds_established") or 0) >= expected:
        return "done"
    return provider.get("eta_note") or DASH


def _revision_text(revisions: list[dict[str, Any]]) -> str:
    """``r2 Active healthy (+1)``: the active (else newest) revision, and how many others."""
    if not revisions:
        return DASH
    current = next((r for r in revisions if r.get("desired_state") == "Active"), revisions[0])
    health = {"True": "healthy", "False": "unhealthy"}.get(current.get("healthy") or "", "health unknown")
    others = f" (+{len(revisions) - 1})" if len(revisions) > 1 else ""
    return f"r{current.get('revision')} {current.get('desired_state') or DASH} {health}{others}"


def _names(names: list[str] | None, count: int | None) -> str:
    """Names kept in the sample, and how many it left out."""
    names = list(names or [])
    more = (count or 0) - len(names)
    return ", ".join(names) + (f" (+{more} more)" if more > 0 else "")


def render_generic(name: str, data: dict[str, Any], now: float | None = None) -> list[str]:
    """Any probe: scalar figures aligned, records as tables, nested records indented."""
    lines = _header(name, data, now)
    skip = {"timestamp", "error", "server", "unobservable"}
    scalars: list[tuple[str, str]] = []
    blocks: list[str] = []
    for key, value in data.items():
        if key in skip:
            continue
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            columns = [k for k, v in value[0].items() if not isinstance(v, (dict, list))]
            blocks += ["", f"{words(key)}:"]
            blocks += table([words(c) for c in columns],
                            [[figure(c, row.get(c), now) for c in columns] for row in value])
        elif isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            columns = [k for k, v in next(iter(value.values())).items() if not isinstance(v, (dict, list))]
            blocks += ["", f"{words(key)}:"]
            blocks += table(["", *(words(c) for c in columns)],
                            [[str(row_name), *(figure(c, row.get(c), now) for c in columns)]
                             for row_name, row in value.items()])
        elif isinstance(value, dict) and not all(isinstance(v, (int, float)) for v in value.values()):
            inner = [(words(k), figure(k, v, now)) for k, v in value.items() if v not in (None, "", [], {})]
            if inner:
                blocks += ["", f"{words(key)}:", *pairs(inner)]
        else:
            scalars.append((words(key), figure(key, value, now)))
    return lines + pairs(scalars) + blocks + unobservable(data.get("unobservable") or {})


RENDERERS: dict[str, Callable[[dict[str, Any], float | None], list[str]]] = {
    "discovery": render_discovery,
    "health": render_health,
    "inventory": render_inventory,
    "throttling": render_throttling,
}


def render_sample(name: str, data: dict[str, Any], now: float | None = None) -> str:
    """The text ``crdscope probe NAME`` prints for one sample's JSON dict."""
    renderer = RENDERERS.get(name)
    lines = renderer(data, now) if renderer else render_generic(name, data, now)
    return "\n".join(lines)
