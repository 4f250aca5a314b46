"""One exporter for a fleet: ``crdscope watch --headless --context A --context B --serve-metrics``.

Two real labs (the session's and a named one of this test's), one crdscope process watching
both, a second exporter watching B alone (the scale-out path: several exporters, each with its
share of contexts), and Debian's Prometheus scraping both with the rules of ``crdscope rules``.
Stopping B's API server (SIGSTOP) must fire "not answering" for cluster B only, from both
exporters, while A's series stay up; the lines of the fleet watch name their context.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import LabHandle
from bench.common import scrape_metrics, stop_process
from tests.e2e.test_rules_prometheus import PROMETHEUS, Prometheus, free_port
from tests.faults.helpers import spawn
from tests.helpers import async_wait_for, wait_for

pytestmark = pytest.mark.lab


@pytest.fixture
def lab_b(lab_binaries):
    """A second lab with contexts of its own name, so one kubeconfig list holds both labs."""
    from crdscope.lab.controlplane import Lab, LabOptions

    lab = Lab(name="fleet-b")
    state = lab.up(lab_binaries, options=LabOptions(name="fleet-b"))
    try:
        yield LabHandle(lab=lab, state=state, kubeconfig=state.kubeconfig, admin_context=state.admin_context)
    finally:
        lab.down()


def up_in(text: str, cluster: str) -> bool:
    return f'crdscope_probe_up{{cluster="{cluster}",probe="health"}} 1.0' in text


async def test_a_fleet_exporter_labels_each_cluster_and_a_rule_fires_for_the_stopped_one_only(lab, lab_b, tmp_path):
    if not os.path.exists(PROMETHEUS):
        pytest.fail("Debian's prometheus is required: make system-deps")
    a, b = lab.admin_context, lab_b.admin_context
    assert a != b
    env = {"KUBECONFIG": os.pathsep.join((lab.kubeconfig, lab_b.kubeconfig))}
    fleet_port, single_port = free_port(), free_port()
    fleet = spawn("watch", "--headless", "--duration", "10m", "--serve-metrics", f"127.0.0.1:{fleet_port}",
                  "--context", a, "--context", b, env=env, stderr=subprocess.DEVNULL)
    single = spawn("watch", "--headless", "--duration", "10m", "--serve-metrics", f"127.0.0.1:{single_port}",
                   "--context", b, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    prometheus = Prometheus(lab, tmp_path, fleet_port, more_exporters=[single_port])
    try:
        text = wait_for(lambda: (t := scrape_metrics(fleet_port)) and up_in(t, a) and up_in(t, b) and t,
                        timeout=120, message="both clusters' probes up in the fleet exporter")
        wait_for(lambda: up_in(scrape_metrics(single_port), b), timeout=120, message="the second exporter up")
        # Every series of the fleet exporter says which cluster it is about.
        series = [line for line in text.splitlines() if line.startswith("crdscope_")]
        assert series and all('cluster="' in line for line in series), [s for s in series if 'cluster="' not in s][:3]
        info = {s.labels["cluster"]: s.labels for family in text_string_to_metric_families(text)
                for s in family.samples if s.name == "crdscope_info"}
        assert {name: labels["server"] for name, labels in info.items()} == {a: lab.server, b: lab_b.server}, info

        lab_b.lab.stop("apiserver")
        try:
            firing = await async_wait_for(
                lambda: (found := prometheus.firing("CrdscopeAPIServerNotAnswering"))
                and {x["labels"]["instance"] for x in found} == {f"127.0.0.1:{fleet_port}", f"127.0.0.1:{single_port}"}
                and found, timeout=60, message="CrdscopeAPIServerNotAnswering firing from both exporters")
            assert {x["labels"]["cluster"] for x in firing} == {b}, firing
            assert up_in(scrape_metrics(fleet_port), a)  # A is still watched, and fine
        finally:
            lab_b.lab.start("apiserver")
    finally:
        prometheus.close()
        stop_process(single)
        stop_process(fleet)
    lines = fleet.stdout.read().splitlines()
    assert any(line.startswith(f"{a}: watching {lab.server}") for line in lines), lines[:5]
    assert any(line.startswith(f"{b}: watching {lab_b.server}") for line in lines), lines[:5]
    assert any(line.startswith(f"{b}: ") and "not answering" in line for line in lines), lines


def test_one_load_command_installs_the_same_crds_into_two_clusters(lab, lab_b, tmp_path):
    from tests.crdsets import delete_crds
    from tests.faults.helpers import OWNED, crdscope, owned_crds
    from tests.helpers import established

    env = {"KUBECONFIG": os.pathsep.join((lab.kubeconfig, lab_b.kubeconfig))}
    a, b = lab.admin_context, lab_b.admin_context
    try:
        done = crdscope("load", "synthetic:12", "--seed", "28", "--rate", "6", "--json", "--new-run",
                        "--context", a, "--context", b, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        summaries = {s["context"]: s for s in map(json.loads, done.stdout.strip().splitlines())}
        assert set(summaries) == {a, b}
        # kubectl, the reference, sees the same 12 crdscope CRDs Established in each cluster.
        seen = {name: owned_crds(handle) for name, handle in ((a, lab), (b, lab_b))}
        assert sorted(seen[a]) == sorted(seen[b]) and len(seen[a]) == 12
        assert all(established(item) for crds in seen.values() for item in crds.values())
        for name, summary in summaries.items():
            assert (summary["created"], summary["established"], summary["failed"]) == (12, 12, 0), (name, summary)
        # Stdin is read once: several clusters need a file.
        refused = crdscope("load", "-", "--context", a, "--context", b, env=env, input="")
        assert refused.returncode == 2 and "standard input can be read once" in refused.stderr
    finally:
        delete_crds(lab, selector=OWNED)
