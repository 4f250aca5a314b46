"""A smoke run of every benchmark at tiny sizes (``python -m bench --quick``).

One run of ``python -m bench --quick --runs 1`` (50 CRDs of the AWS set, one small lab
shared by the benchmarks that do not need fresh ones) writes its JSON results to a
temporary directory; each test then checks one benchmark's result, cross-checking
figures that two independent observers measured (kubectl and crdscope, the server's
FlowSchema counter and crdscope's own transport, the server's Established timestamps
and the loaders' exit).  No timing is asserted: this machine is shared and noisy.

``python -m bench footprint --quick`` (fresh labs of its own, 60 CRDs, quiet, headless and the TUI
in tmux) runs in a fixture of its own: ``-k footprint`` selects it alone.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, SHARED_CRDS

pytestmark = [pytest.mark.lab, pytest.mark.shared_crds]

RESULTS_MD = ROOT / "bench" / "RESULTS.md"
SMOKE_TIMEOUT_SECONDS = 540


def _digest() -> str | None:
    return hashlib.sha256(RESULTS_MD.read_bytes()).hexdigest() if RESULTS_MD.exists() else None


@pytest.fixture(scope="module")
def smoke(tmp_path_factory, lab_binaries) -> dict[str, list[dict]]:
    """Run every benchmark once at smoke sizes; benchmark name -> its result documents."""
    if not SHARED_CRDS.is_dir():
        pytest.skip(f"{SHARED_CRDS} is absent (real Crossplane CRD sets live beside the checkout)")
    output = tmp_path_factory.mktemp("bench-results")
    before = _digest()
    done = subprocess.run([sys.executable, "-m", "bench", "--quick", "--runs", "1", "--output", str(output),
                           "--no-results-md"], cwd=ROOT, capture_output=True, text=True,
                          timeout=SMOKE_TIMEOUT_SECONDS)
    assert done.returncode == 0, f"python -m bench --quick failed:\n{done.stderr[-3000:]}"
    assert _digest() == before, "--no-results-md must leave bench/RESULTS.md alone"
    documents: dict[str, list[dict]] = {}
    for line in done.stdout.splitlines():
        announced = json.loads(line)
        documents.setdefault(announced["benchmark"], []).append(
            json.loads(open(announced["result"], encoding="utf-8").read()))
    return documents


def only(smoke: dict[str, list[dict]], name: str) -> dict:
    assert len(smoke.get(name, [])) == 1, f"{name}: one result per size expected, got {smoke.get(name)}"
    document = smoke[name][0]
    assert document["quick"] is True
    assert document["kubernetes"].startswith("v1."), document["kubernetes"]
    assert document["goals"] and all(isinstance(met, bool) for met in document["goals"].values()), \
        f"{name}: every goal must be marked met or missed: {document['goals']}"
    return document


def test_every_benchmark_ran(smoke):
    assert set(smoke) == {"discovery", "loader", "overhead", "ui_latency", "metrics_parse", "cli", "doctor"}


def test_doctor_ran_and_kubectl_was_timed_beside_it(smoke):
    document = only(smoke, "doctor")
    figures = document["figures"]
    assert document["goals"]["exit code = worst severity"] is True, figures
    assert figures["kubectl_cold_s"]["n"] >= 3 and figures["kubectl_cold_s"]["min"] > 0
    assert figures["crds_kubectl"] >= 50 and figures["doctor_wall_s"] >= 8


def test_cli_start_up_was_timed_beside_the_interpreter_and_kubectl(smoke):
    figures = only(smoke, "cli")["figures"]
    for contender in ("python_floor", "crdscope_help", "crdscope_lab_status", "kubectl_version"):
        assert figures[f"{contender}_s"]["n"] >= 5 and figures[f"{contender}_cpu_s"]["n"] >= 5
    # A crdscope command does at least what a bare interpreter does (the floor is a floor).
    assert figures["crdscope_help_cpu_s"]["median"] >= figures["python_floor_cpu_s"]["min"]


def test_discovery_contenders_find_the_same_resources_as_kubectl(smoke):
    figures = only(smoke, "discovery")["figures"]
    # kubectl api-resources and every crdscope contender counted the same resources.
    assert isinstance(figures["resources"], int), f"contenders disagree: {figures['resources']}"
    assert figures["resources"] >= 50  # the 50 CRDs' kinds and the built-in resources
    for contender in ("kubectl_cold", "crdscope_cli_aggregated", "crdscope_aggregated", "floor_aggregated",
                      "crdscope_cli_legacy", "crdscope_legacy", "floor_legacy"):
        assert figures[f"{contender}_s"]["n"] == 1 and figures[f"{contender}_s"]["min"] > 0
    assert figures["aggregated_vs_floor"]["n"] == 1
    assert figures["legacy_requests"] > 2


def test_loader_contenders_established_every_crd_before_they_exited(smoke):
    figures = only(smoke, "loader")["figures"]
    assert "50 CRDs" in smoke["loader"][0]["sizes"]
    for contender in ("crdscope_default", "kubectl", "crdscope_best"):
        wall = figures[f"{contender}_s"]["median"]
        server = figures[f"server_{contender}_s"]["median"]
        # The server's own Established timestamps (whole seconds) put the last CRD before the exit.
        assert 0 < server <= wall + 1.0, f"{contender}: server says {server}s, the process took {wall}s"
    phases = figures["kubectl_apply_s"]["median"] + figures["kubectl_wait_s"]["median"]
    assert phases == pytest.approx(figures["kubectl_s"]["median"])
    assert figures["best_setting"] in figures["sweep"]


def test_overhead_server_and_client_count_the_same_requests(smoke):
    figures = only(smoke, "overhead")["figures"]
    assert figures["steady_s"] >= 15
    server, client = figures["server_req_per_s"], figures["client_req_per_s"]
    assert server > 0, "the FlowSchema of crdscope's user counted nothing"
    # Snapshots of both counters are taken a few milliseconds apart: one request of slack.
    assert abs(server - client) <= 1.0 / figures["steady_s"] + 0.05 * server, (server, client)
    assert figures["client_kb_per_s"] > 0 and figures["cpu_s_per_min"] > 0
    assert 10 < figures["steady_peak_rss_mb"] <= figures["run_peak_rss_mb"] + 1


def test_ui_latency_timed_every_key_press(smoke):
    figures = only(smoke, "ui_latency")["figures"]
    assert figures["presses"] == 15
    assert 0 < figures["key_p50_ms"] <= figures["key_p99_ms"] <= figures["key_max_ms"]
    # The stall meter ticked through the round: a loop never wakes its 10 ms timer exactly on time
    # for the whole of it, so a worst stall of 0 means the meter did not run (or took nothing).
    assert figures["worst_stall_ms_rounds"]["n"] == 1
    assert 0 <= figures["stall_p99_ms"] <= figures["worst_stall_ms"] and figures["worst_stall_ms"] > 0
    # The same timer in a process of its own ran beside the round (the machine's floor).
    assert 0 <= figures["machine_floor_stall_p99_ms"] <= figures["machine_floor_worst_stall_ms"]
    assert figures["machine_floor_worst_stall_ms"] > 0


def test_metrics_parse_read_a_real_scrape(smoke):
    figures = only(smoke, "metrics_parse")["figures"]
    assert figures["scrape_mb"] > 0
    assert figures["stream_all_mb_per_s"]["n"] == 1


FOOTPRINT_TIMEOUT_SECONDS = 360


@pytest.fixture(scope="module")
def footprint(tmp_path_factory, lab_binaries) -> dict:
    """``python -m bench footprint --quick`` on 60 CRDs (a fresh lab per mode: quiet, headless, the TUI in
    tmux), a 15 s after-window; its result document."""
    if not SHARED_CRDS.is_dir():
        pytest.skip(f"{SHARED_CRDS} is absent (real Crossplane CRD sets live beside the checkout)")
    if not shutil.which("tmux"):
        pytest.skip("tmux is absent (make system-deps)")
    output = tmp_path_factory.mktemp("footprint-results")
    before = _digest()
    done = subprocess.run([sys.executable, "-m", "bench", "footprint", "--quick", "--size", "60",
                           "--after-seconds", "15", "--output", str(output)], cwd=ROOT, capture_output=True,
                          text=True, timeout=FOOTPRINT_TIMEOUT_SECONDS)
    assert done.returncode == 0, f"python -m bench footprint --quick failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert _digest() == before, "a quick run must leave bench/RESULTS.md alone"
    announced = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(announced) == 1, done.stdout
    assert "install (s)" in done.stdout, "the table for people is printed after the JSON line"
    return json.loads(open(announced[0]["result"], encoding="utf-8").read())


def _leftovers() -> list[str]:
    """Processes whose command line names a footprint run's directory (a watch or a tmux server)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "crdscope-bench-footprint-" in text:
            found.append(text[:200])
    return found


def test_footprint_measured_every_mode_and_left_nothing_running(footprint):
    assert footprint["quick"] is True and footprint["kubernetes"].startswith("v1.")
    runs = footprint["figures"]["runs"]
    assert [run["mode"] for run in runs] == ["quiet", "headless", "tui"]
    for run in runs:
        assert run["failed"] is None, run
        assert run["load"]["established"] == 60
        assert run["install_s"] > 0 and run["apiserver_cpu_install_s"] > 0
        assert run["apiserver_rss_end_mib"] > 100 and run["apiserver_rss_after_mib"] > 100
        # One RSS sample a second from the load's start to the end of the after-window.
        assert len(run["rss_mib_every_second"]) >= run["install_s"] + 5
        assert run["mib_per_crd_own"] is not None and run["own_fit_points"] >= 2
    for run in runs[1:]:
        assert run["watch_stopped_by"] == ("SIGINT" if run["mode"] == "headless" else "q"), run
        assert run["mib_per_crd_reported"] is not None
        assert run["watch_cpu_install_s"] > 0
    assert runs[1]["watch_exit"] == 130  # the headless watch reports an interrupt
    assert all(met in (True, False, None) for met in footprint["goals"].values())
    assert not _leftovers(), _leftovers()


def test_footprint_counts_add_up_by_path_and_by_origin(footprint):
    for run in footprint["figures"]["runs"][1:]:
        counts = run["footprint"]
        assert counts is not None, f"{run['mode']}: the recording held no footprint sample"
        assert counts["requests_total"] > 0 and counts["bytes_total"] > 0
        # The monitor's own requests, the same whether counted by path or by part of the monitor.
        for table in ("by_path", "by_origin"):
            assert sum(cell["requests"] for cell in counts[table].values()) == counts["requests_total"], table
            assert sum(cell["bytes"] for cell in counts[table].values()) == counts["bytes_total"], table
        # The load ran as a process of its own: none of its requests are the watch's.
        assert counts.get("loader_requests_total", 0) == 0
        # Footprint samples before the load and after it: what the monitor read during the install.
        # Its CRD watch streams every change (bytes as they arrive); requests may be none at all in a
        # 3-second load of 60 CRDs (the PING sends no request, probes keep their cadences).
        assert 0 <= run["install_requests"] <= counts["requests_total"]
        assert 0 < run["install_bytes"] <= counts["bytes_total"]


def test_request_cost_timed_every_request_on_the_loaded_lab(tmp_path):
    """``python -m bench request_cost`` at a tiny size: every request was answered in the media type
    asked for (the benchmark refuses another), the server's CPU was read around each one."""
    if not SHARED_CRDS.is_dir():
        pytest.skip(f"{SHARED_CRDS} is absent (real Crossplane CRD sets live beside the checkout)")
    before = _digest()
    done = subprocess.run([sys.executable, "-m", "bench", "request_cost", "--size", "40", "--rounds", "2",
                           "--output", str(tmp_path), "--no-results-md"], cwd=ROOT, capture_output=True, text=True,
                          timeout=SMOKE_TIMEOUT_SECONDS)
    assert done.returncode == 0, f"python -m bench request_cost failed:\n{done.stderr[-3000:]}"
    assert _digest() == before
    document = json.loads(Path(json.loads(done.stdout)["result"]).read_text())
    figures = document["figures"]
    assert figures["crds"] == 40 and document["kubernetes"].startswith("v1.")
    assert set(figures["runs"]) == {"crd_list_json", "crd_list_protobuf", "metrics", "apis"}
    for runs in figures["runs"].values():
        assert len(runs) == 2 and all(run["cpu_s"] >= 0 and run["wall_s"] > 0 and run["mb"] > 0 for run in runs), runs
    # Each list received the same collection: the 40 real CRDs, schemas and all (tens of KB each).
    for name in ("crd_list_json", "crd_list_protobuf"):
        runs = figures["runs"][name]
        assert len({run["mb"] for run in runs}) == 1 and runs[0]["mb"] > 40 * 0.01, runs
