"""The figures of the footprint benchmark: per-mode series, ratios to the quiet runs, goals, the table."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from .common import median_at_most, ratios, stats

if TYPE_CHECKING:
    from .footprint import Plan


def series(runs: list[dict[str, Any]], mode: str, key: str) -> list[float | None]:
    """A figure of every run of ``mode``, in order (None for a failed run or an absent figure)."""
    return [None if run["failed"] else run.get(key) for run in runs if run["mode"] == mode]


def footprint_series(runs: list[dict[str, Any]], mode: str, key: str, scale: float = 1.0) -> list[float | None]:
    """A figure of the runs' last footprint sample (None where a recording had none)."""
    values: list[float | None] = []
    for run in runs:
        if run["mode"] == mode:
            value = (run.get("footprint") or {}).get(key)
            values.append(value / scale if isinstance(value, int | float) and not run["failed"] else None)
    return values


def within_spread(values: list[float | None], reference: list[float | None]) -> bool | None:
    """The median of ``values`` within min..max of ``reference`` (None: fewer than two references)."""
    measured = [v for v in values if v is not None]
    spread = [v for v in reference if v is not None]
    if len(spread) < 2 or not measured:
        return None
    return min(spread) <= statistics.median(measured) <= max(spread)


def summarise(plan: Plan, runs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, bool | None], list[str]]:
    """(figures, goals, notes) of one Kubernetes version's runs."""
    figures: dict[str, Any] = {}
    goals: dict[str, bool | None] = {}
    notes: list[str] = []
    if plan.watch_nice:
        notes.append(f"the watch ran at nice {plan.watch_nice}: it took no cycle the co-located API server wanted")

    def quiet(key: str) -> list[float | None]:
        return series(runs, "quiet", key)

    for key, name in (("install_s", "install_s"), ("apiserver_cpu_install_s", "cpu_install_s"),
                      ("apiserver_cpu_after_s", "cpu_after_s"), ("apiserver_rss_end_mib", "rss_end_mib"),
                      ("apiserver_rss_after_mib", "rss_after_mib"), ("mib_per_crd_own", "mib_per_crd_own")):
        figures[f"quiet_{name}"] = stats(quiet(key))
    after = f"{plan.after_seconds:.0f} s later"
    for mode in (m for m in plan.modes if m.watch):
        m = mode.name

        def watched(key: str, mode_name: str = m) -> list[float | None]:
            return series(runs, mode_name, key)

        install = ratios(watched("install_s"), quiet("install_s"))
        cpu = ratios(watched("apiserver_cpu_install_s"), quiet("apiserver_cpu_install_s"))
        reported_vs_quiet = ratios(watched("mib_per_crd_reported"), quiet("mib_per_crd_own"))
        figures.update({
            f"{m}_install_x": stats(install),
            f"{m}_cpu_install_x": stats(cpu),
            f"{m}_cpu_after_x": stats(ratios(watched("apiserver_cpu_after_s"), quiet("apiserver_cpu_after_s"))),
            f"{m}_rss_end_x": stats(ratios(watched("apiserver_rss_end_mib"), quiet("apiserver_rss_end_mib"))),
            f"{m}_rss_after_x": stats(ratios(watched("apiserver_rss_after_mib"), quiet("apiserver_rss_after_mib"))),
            f"{m}_rss_end_mib": stats(watched("apiserver_rss_end_mib")),
            f"{m}_rss_after_mib": stats(watched("apiserver_rss_after_mib")),
            f"{m}_cpu_watch_start_s": stats(watched("apiserver_cpu_watch_start_s")),
            f"{m}_mib_per_crd_reported": stats(watched("mib_per_crd_reported")),
            f"{m}_mib_per_crd_own": stats(watched("mib_per_crd_own")),
            f"{m}_reported_vs_quiet_own": stats(reported_vs_quiet),
            f"{m}_reported_vs_own": stats(ratios(watched("mib_per_crd_reported"), watched("mib_per_crd_own"))),
            f"{m}_requests": stats(footprint_series(runs, m, "requests_total")),
            f"{m}_mb": stats(footprint_series(runs, m, "bytes_total", 1e6)),
            f"{m}_install_requests": stats(watched("install_requests")),
            f"{m}_install_mb": stats([v / 1e6 if v is not None else None for v in watched("install_bytes")]),
            f"{m}_after_req_per_s": stats(watched("after_requests_per_s")),
            f"{m}_after_kb_per_s": stats([v / 1e3 if v is not None else None
                                          for v in watched("after_bytes_per_s")]),
            f"{m}_watch_cpu_install_s": stats(watched("watch_cpu_install_s")),
            f"{m}_watch_cpu_after_s": stats(watched("watch_cpu_after_s")),
            f"{m}_steady_cpu_pct_of_core": stats(watched("steady_cpu_pct_of_core")),
            f"{m}_steady_rss_mb": stats(watched("steady_rss_mb")),
            f"{m}_steady_requests_per_s": stats(watched("steady_requests_per_s")),
            f"{m}_steady_kb_per_s": stats(watched("steady_kb_per_s")),
        })
        if any(v is not None for v in watched("steady_requests_per_s")):
            steady = [v for v in watched("steady_requests_per_s") if v is not None]
            cpu_share = [v for v in watched("steady_cpu_pct_of_core") if v is not None]
            rss = [v for v in watched("steady_rss_mb") if v is not None]
            goals[f"{m}: steady < 0.5 requests/s"] = statistics.median(steady) < 0.5
            goals[f"{m}: steady < 1% of a core"] = statistics.median(cpu_share) < 1.0 if cpu_share else None
            goals[f"{m}: steady RSS < 110 MB"] = statistics.median(rss) < 110 if rss else None
        goals[f"{m}: install <= 1.02x quiet"] = median_at_most(install, 1.02)
        goals[f"{m}: API server CPU during install <= 1.02x"] = median_at_most(cpu, 1.02)
        goals[f"{m}: RSS at end within quiet spread"] = within_spread(
            watched("apiserver_rss_end_mib"), quiet("apiserver_rss_end_mib"))
        goals[f"{m}: RSS {after} within quiet spread"] = within_spread(
            watched("apiserver_rss_after_mib"), quiet("apiserver_rss_after_mib"))
        goals[f"{m}: MiB/CRD reported within 5% of quiet"] = median_at_most(
            [abs(r - 1) for r in reported_vs_quiet], 0.05)
        if all(v is None for v in footprint_series(runs, m, "requests_total")):
            notes.append(f"{m}: no footprint sample in any recording (probes/footprint.py not there yet?): "
                         "the monitor's requests and bytes are null")
    if len([v for v in quiet("apiserver_rss_end_mib") if v is not None]) < 2:
        notes.append("fewer than two quiet runs: the RSS goals (within the quiet runs' spread) are not judged")
    for run in runs:
        if run["failed"]:
            notes.append(f"{run['mode']} pair {run['pair']} failed: {run['failed']}")
    figures["after_s"] = plan.after_seconds
    figures["pairs"] = plan.pairs
    figures["modes"] = {mode.name: mode.config or ("" if mode.watch else "nobody watching") for mode in plan.modes}
    figures["runs"] = runs
    return figures, goals, notes


#: (label, figure per run, how it prints) of the table printed at the end.
TABLE_ROWS = (
    ("install (s)", "install_s", "{:.1f}"),
    ("API server CPU, install (s)", "apiserver_cpu_install_s", "{:.1f}"),
    ("API server CPU, after-window (s)", "apiserver_cpu_after_s", "{:.1f}"),
    ("API server CPU, watch start-up (s)", "apiserver_cpu_watch_start_s", "{:.1f}"),
    ("API server RSS, end of install (MiB)", "apiserver_rss_end_mib", "{:.0f}"),
    ("API server RSS, end of after-window (MiB)", "apiserver_rss_after_mib", "{:.0f}"),
    ("MiB/CRD, benchmark's own fit", "mib_per_crd_own", "{:.2f}"),
    ("MiB/CRD, crdscope reported", "mib_per_crd_reported", "{:.2f}"),
    ("monitor requests (whole run)", ("footprint", "requests_total"), "{:.0f}"),
    ("monitor MB of answers (whole run)", ("footprint", "bytes_total"), "{:.2f}"),
    ("monitor requests, install", "install_requests", "{:.0f}"),
    ("monitor MB of answers, install", "install_bytes", "{:.2f}"),
    ("monitor requests/s, after-window", "after_requests_per_s", "{:.2f}"),
    ("monitor KB/s of answers, after-window", "after_bytes_per_s", "{:.1f}"),
    ("watch CPU, install (s)", "watch_cpu_install_s", "{:.1f}"),
    ("watch CPU, after-window (s)", "watch_cpu_after_s", "{:.1f}"),
    ("steady: monitor % of a core", "steady_cpu_pct_of_core", "{:.2f}"),
    ("steady: monitor RSS (MB)", "steady_rss_mb", "{:.0f}"),
    ("steady: monitor requests/s", "steady_requests_per_s", "{:.2f}"),
    ("steady: monitor KB/s", "steady_kb_per_s", "{:.1f}"),
)


def table(plan: Plan, runs: list[dict[str, Any]]) -> str:
    """Medians per mode, and for watched modes the median of the pairwise ratios to quiet."""
    def values(mode: str, key: str | tuple[str, str]) -> list[float | None]:
        if isinstance(key, tuple):
            scale = 1e6 if key[1] == "bytes_total" else 1.0
            return footprint_series(runs, mode, key[1], scale)
        scale = {"after_bytes_per_s": 1e3, "install_bytes": 1e6}.get(key, 1.0)
        return [v / scale if v is not None else None for v in series(runs, mode, key)]

    heads = [mode.name for mode in plan.modes]
    rows = [["figure (median)", *heads]]
    for label, key, form in TABLE_ROWS:
        row = [label]
        quiet = values("quiet", key)
        for mode in heads:
            mine = values(mode, key)
            present = [v for v in mine if v is not None]
            if not present:
                row.append("-")
                continue
            cell = form.format(statistics.median(present))
            paired = ratios(mine, quiet) if mode != "quiet" else []
            if paired:
                cell += f" ({statistics.median(paired):.3f}x)"
            row.append(cell)
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
                     for row in rows)
