"""``crdscope report``: figures of a recording made by hand, checked against hand computations."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from crdscope.base.samples.loader import LoaderSample
from crdscope.base.samples.throttling import PriorityLevel, Responses429, ThrottlingSample
from crdscope.base.samples.discovery import ClientModel, DiscoverySample
from crdscope.base.samples.health import HealthSample, Outage
from crdscope.base.samples.inventory import InventorySample
from crdscope.base.samples.openapi import LagStats, OpenAPISample
from crdscope.session.recorder import ClusterInfo, Recorder
from crdscope.session.report import summarise
from crdscope.session.report_render import render_html, render_markdown
from crdscope.cli.main import cli

T0 = 1_800_000_000.0
MIB = 1 << 20


def write(path, samples, events=(), context: str = "prod"):
    with Recorder(path, ClusterInfo(server="https://10.0.0.1:6443", context=context, kubernetes_version="v1.37.2")) as r:
        for sample in samples:
            r(sample)
        for event in events:
            r(event)
    return path


def session_samples(with_loader: bool = False) -> list:
    samples = []
    # inventory every 2 s: 0, 0, 10, 20, 30, 30 CRDs
    for i, crds in enumerate([0, 0, 10, 20, 30, 30]):
        samples.append(InventorySample(timestamp=T0 + 2 * i, crds=crds, established=crds))
    # health: 300 MiB + 2 MiB per CRD; a restart between t+6 and t+8 (start time moves), down at t+6
    for i, (crds, restarts, start) in enumerate([(0, 0, 100.0), (10, 0, 100.0), (20, 0, 100.0), (30, 1, 500.0)]):
        t = T0 + 1 + 2 * i + (2 if i == 3 else 0)
        samples.append(HealthSample(timestamp=t, crds=crds, rss_bytes=(300 + 2 * crds) * MIB, restarts=restarts,
                                    start_time=start, ready=True, mib_per_crd=2.0 if i == 2 else None, r2=1.0,
                                    outages=(Outage(T0 + 7.0, T0 + 9.0, 2.0, "connection refused"),) if i == 3 else ()))
    samples.append(HealthSample(timestamp=T0 + 7.0, error="cannot reach https://10.0.0.1:6443: connection refused"))
    samples.sort(key=lambda s: s.timestamp)
    models = lambda s: (ClientModel("client-go default", 5.0, 10, 4 * s, 3 * s),  # noqa: E731
                        ClientModel("kubectl >=1.24", 50.0, 300, s, 0.0))
    samples.append(DiscoverySample(timestamp=T0 + 0.2, mode="aggregated", group_versions=23, resources=71,
                                   seconds=0.25, client_models=models(0.5)))
    samples.append(DiscoverySample(timestamp=T0 + 10.2, mode="aggregated", group_versions=41, resources=131,
                                   seconds=0.75, client_models=models(6.5)))
    levels = lambda a, b: (PriorityLevel(name="workload-low", rejected_per_s=a),  # noqa: E731
                           PriorityLevel(name="global-default", rejected_per_s=b))
    samples += [ThrottlingSample(timestamp=T0 + 3, priority_levels=levels(1.0, 0.5), responses_429=Responses429(total=2)),
                ThrottlingSample(timestamp=T0 + 5, priority_levels=levels(4.0, 2.0), responses_429=Responses429(total=9)),
                ThrottlingSample(timestamp=T0 + 9, priority_levels=levels(0.0, 0.0), responses_429=Responses429(total=9))]
    samples += [OpenAPISample(timestamp=T0 + 4, backlog=7),
                OpenAPISample(timestamp=T0 + 10, backlog=0, lag_seconds={
                    "established": LagStats(p50=1.5, p95=2.5, max=3.0, count=30),
                    "openapi_v3": LagStats(p50=4.0, p95=9.0, max=12.0, count=30)})]
    if with_loader:
        samples.append(LoaderSample(timestamp=T0 + 9.5, source="synthetic:30", state="done", requested=30,
                                    created=30, established=30, crds_per_second=3.75, elapsed_seconds=8.0))
    return sorted(samples, key=lambda s: s.timestamp)


def test_summary_figures(tmp_path):
    summary = summarise(write(tmp_path / "s.jsonl", session_samples()))
    assert (summary.start, summary.end) == (T0, T0 + 10.2)
    assert summary.cluster.server == "https://10.0.0.1:6443"
    # CRDs from the inventory: 0 -> 30; the count moved from t+4 to t+8, from the sample at t+2: 30 / 6 s
    assert (summary.crds_start, summary.crds_end, summary.crds_loaded) == (0, 30, 30)
    assert summary.load_rate_per_s == pytest.approx(5.0)
    # discovery at the start and the end, with the kubectl 1.24+ model's seconds
    assert summary.discovery_start.group_versions == 23 and summary.discovery_end.group_versions == 41
    assert (summary.discovery_start.kubectl_124_seconds, summary.discovery_end.kubectl_124_seconds) == (0.5, 6.5)
    # APF: the peak is 4.0 + 2.0 at t+5; crdscope itself saw 9 429s
    assert summary.apf_peak_per_s == 6.0 and summary.apf_peak_at == T0 + 5
    assert summary.apf_peak_levels == "workload-low 4.0/s, global-default 2.0/s"
    assert summary.responses_429 == 9
    # OpenAPI: the last lag percentiles, and the backlog's peak
    assert summary.openapi_lag["openapi_v3"] == {"p50": 4.0, "p95": 9.0, "max": 12.0, "count": 30}
    assert (summary.backlog_peak, summary.backlog_peak_at) == (7, T0 + 4)
    # memory: the last fit that had a slope (the restarted process has none yet)
    assert summary.mib_per_crd == 2.0 and summary.fit_start_time == 100.0
    # one restart (first sample after it), one outage window from the health probe
    assert summary.restarts == [T0 + 9.0]
    assert [(w.start, w.end, w.seconds) for w in summary.outages] == [(T0 + 7.0, T0 + 9.0, 2.0)]
    # no events were recorded: the log is derived from the samples with the live rules
    assert not summary.recorded_events
    kinds = [e.kind for e in summary.events]
    assert kinds.count("apiserver-restarted") == 1 and "throttling-began" in kinds
    assert "discovery-over-budget" in kinds  # 6.5 s > the default 5 s budget


def test_the_loader_counts_when_it_was_recorded(tmp_path):
    summary = summarise(write(tmp_path / "s.jsonl", session_samples(with_loader=True)))
    assert summary.crds_loaded == 30 and summary.load_rate_per_s == 3.75
    assert summary.load_source == "loader (synthetic:30)"


def test_markdown(tmp_path):
    text = render_markdown(summarise(write(tmp_path / "s.jsonl", session_samples())))
    for line in ["- **Loaded**: 30", "- **Rate**: 5 CRDs/s", "- **Restarts**: 1 (at ",
                 "- **Outage windows**: 1", "- **Peak rejections**: 6 /s at ", "- **Memory per CRD**: 2.000 MiB",
                 "| openapi_v3 | 4.00 s | 9.00 s | 12.00 s | 30 |",
                 "| end | ", "| 0.750 s | 26.00 s (waited 19.50) | 6.50 s |"]:
        assert line in text, line


def test_html_is_self_contained_with_plots(tmp_path):
    html = render_html(summarise(write(tmp_path / "s.jsonl", session_samples())))
    assert html.startswith("<!DOCTYPE html>") and html.count("<svg") == 5
    assert "<script" not in html and "<link" not in html and not re.search(r"\bsrc\s*=", html)
    assert 'class="band"' in html and 'class="marker"' in html and 'class="fit"' in html
    assert not re.search(r"#[0-9a-fA-F]{3,6}\b", html)  # colours by name, in the stylesheet only


def test_cli_writes_the_report_and_notes_damage(tmp_path):
    path = write(tmp_path / "s.jsonl", session_samples())
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-3]) + lines[-3][:20])  # torn mid-record, no end record
    out = tmp_path / "r.html"
    result = CliRunner().invoke(cli, ["report", str(path), "--format", "html", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert "damaged at line" in result.output
    assert "damaged at line" in out.read_text()
    result = CliRunner().invoke(cli, ["report", str(path)])
    assert result.exit_code == 0 and "# crdscope session report" in result.output


def test_one_report_of_a_fleet_holds_every_cluster(tmp_path):
    import dataclasses

    # As a fleet watch writes them: one recording per cluster, named by its context.
    first = write(tmp_path / "rec.lab-a.jsonl", session_samples(), context="lab-a")
    second = write(tmp_path / "rec.lab-b.jsonl", [dataclasses.replace(s, timestamp=s.timestamp + 1)
                                                   for s in session_samples(with_loader=True)], context="lab-b")
    result = CliRunner().invoke(cli, ["report", str(first), str(second)])
    assert result.exit_code == 0, result.output
    text = result.output
    assert text.startswith("# crdscope fleet report: 2 clusters")
    overview = [line for line in text.splitlines() if line.startswith("| ") and ".jsonl" in line]
    assert [line.split(" | ")[0].lstrip("| ") for line in overview] == ["lab-a", "lab-b"]
    assert [line.split(" | ")[-1].rstrip(" |") for line in overview] == ["rec.lab-a.jsonl", "rec.lab-b.jsonl"]
    assert text.count("## crdscope session report:") == 2 and text.count("### Memory") == 2
    html = CliRunner().invoke(cli, ["report", str(first), str(second), "--format", "html"]).output
    assert html.count("<!DOCTYPE html>") == 1 and html.count("<article>") == 2 and html.count("<svg") == 10
