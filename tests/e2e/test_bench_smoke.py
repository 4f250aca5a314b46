"""A smoke run of every benchmark at tiny sizes (``python -m bench --quick``).

One run of ``python -m bench --quick --runs 1`` (50 CRDs of the AWS set, one small lab
shared by the benchmarks that do not need fresh ones) writes its JSON results to a
temporary directory; each test then checks one benchmark's result, cross-checking
figures that two independent observers measured (kubectl and crdscope, the server's
FlowSchema counter and crdscope's own transport, the server's Established timestamps
and the loaders' exit).  No timing is asserted: this machine is shared and noisy.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

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
