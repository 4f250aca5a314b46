"""The etcd-connections finding on a real lab: silent where the server does what its minor's design does,
open where it holds more, closed once it no longer does.

A lab of its own (named, under ``$CRDSCOPE_LAB_HOME``, where crdscope's processes look for labs and
count the API server's etcd connections from /proc) on the newest minor, with 20 tiny CRDs:

* idle, and with every kind in use (listed, five holding objects): ``doctor`` finds nothing about etcd
  connections although the count grew by one per kind (issue 46: "87 etcd connections for 21 CRDs"
  was a warning on exactly such a lab);
* the API server restarted with its etcd member given twice in ``--etcd-servers`` (by address and by
  name, a real misconfiguration): every storage's client connects to both endpoints, the count doubles
  (``python -m bench etcd_connections`` measured 1.98x on every minor), and the finding opens in
  ``doctor``, the headless watch and the exporter, stating the expected figure and where it came from;
* restarted as before: the headless watch closes it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.common import scrape_metrics, stop_process
from tests.crdsets import crd_names, write_tiny_crds
from tests.e2e.test_rules_prometheus import free_port, probes_up
from tests.e2e.test_webhooks import collect
from tests.faults.helpers import crdscope, spawn
from tests.helpers import wait_for

pytestmark = pytest.mark.lab

NAME = "etcdconn"
KINDS = 20
OURS = {"app.kubernetes.io/managed-by": "crdscope"}
FINDING = "etcd-connections-per-crd"


@pytest.fixture
def named_lab(lab_binaries) -> Iterator[tuple[object, object, tuple[str, ...]]]:
    from crdscope.lab.controlplane import Lab, LabOptions

    lab = Lab(name=NAME)
    state = lab.up(lab_binaries, options=LabOptions(name=NAME))
    try:
        yield lab, state, ("--kubeconfig", state.kubeconfig, "--context", state.admin_context)
    finally:
        lab.down()


def kubectl(state, *args: str, input: str | None = None) -> str:
    done = subprocess.run(["kubectl", f"--kubeconfig={state.kubeconfig}", f"--context={state.admin_context}", *args],
                          capture_output=True, text=True, input=input, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def health(where) -> dict:
    """``crdscope probe health --json``: the etcd connections as crdscope counts them on the lab."""
    sample = json.loads(crdscope("probe", "health", "--json", *where, timeout=120).stdout)
    assert sample["etcd_connections"] is not None, sample["unobservable"]
    return sample


def doctor(where) -> tuple[subprocess.CompletedProcess, dict, dict | None]:
    done = crdscope("doctor", "--duration", "20s", "--json", *where, timeout=180)
    report = json.loads(done.stdout)
    found = next((f for f in report["findings"] if f["id"] == FINDING), None)
    return done, report, found


def use_every_kind(state, names: list[str]) -> None:
    """A first request of every kind (kubectl get), and an object in five of them."""
    kubectl(state, "get", ",".join(names), "-o", "name")
    for name in names[:5]:
        plural, group = name.split(".", 1)
        kind = kubectl(state, "get", "crd", name, "-o", "jsonpath={.spec.names.kind}").strip()
        kubectl(state, "create", "-f", "-", input=json.dumps(
            {"apiVersion": f"{group}/v1", "kind": kind, "metadata": {"name": f"one-{plural}"}}))


def restart_apiserver(lab, extra: tuple[str, ...] = ()) -> None:
    """Restart the lab's API server with its flags plus ``extra`` (and without any earlier extra)."""
    state = lab.require()
    apiserver = state.components["apiserver"]
    apiserver.argv[:] = [arg for arg in apiserver.argv if not arg.startswith("--etcd-servers=http://localhost:")]
    apiserver.argv.extend(extra)
    lab.save(state)
    lab.kill("apiserver")
    lab.start("apiserver")


def test_silent_on_its_design_and_open_above_it_on_every_front_end(named_lab, tmp_path: Path):
    lab, state, where = named_lab
    path = write_tiny_crds(tmp_path, KINDS, prefix="etcdconn", labels=OURS)
    names = crd_names([path])
    kubectl(state, "apply", "-f", str(path))
    kubectl(state, "wait", "--for=condition=Established", *(f"crd/{n}" for n in names), "--timeout=120s")

    idle = health(where)
    done, report, found = doctor(where)
    assert found is None, found
    assert "etcd connections against the minor's design (lab)" in report["checked"], report["not_checked"]

    use_every_kind(state, names)
    in_use = wait_for(lambda: (h := health(where))["etcd_connections"] >= idle["etcd_connections"] + KINDS and h,
                      timeout=60, interval=2, message="one connection more per kind in use")
    done, report, found = doctor(where)
    assert found is None, (found, in_use["etcd_connections"])

    port = free_port()
    restart_apiserver(lab, (f"--etcd-servers=http://localhost:{lab.require().components['etcd'].port}",))
    kubectl(state, "get", ",".join(names), "-o", "name")  # a restart builds the kinds' storages again
    doubled = wait_for(lambda: (h := health(where))["etcd_connections"] >= 1.8 * in_use["etcd_connections"] and h,
                       timeout=60, interval=2, message="every storage connected to both endpoints")
    watch = spawn("watch", "--headless", "--duration", "10m", "--serve-metrics", f"127.0.0.1:{port}", *where,
                  stderr=subprocess.DEVNULL)
    lines = collect(watch.stdout)
    try:
        done, report, found = doctor(where)
        assert found is not None, (report["findings"], doubled["etcd_connections"])
        assert found["severity"] == "warning" and done.returncode == report["exit_code"] >= 1
        assert "its 1.37 design explains for 20 CRDs" in found["title"], found
        evidence = " ".join(found["evidence"])
        assert "baseline 69 (measured on v1.37.2" in evidence and "python -m bench etcd_connections" in evidence
        assert "at most the 20 versions the 20 CRDs serve" in evidence, evidence
        assert "--etcd-servers" in found["cause"] and "an upgrade would not lower it" in found["remedy"]

        opened = wait_for(lambda: next((line for line in lines if "finding opened: API server holds" in line), None),
                          timeout=120, message=f"the headless line (so far: {lines[-5:]})")
        assert "warning" in opened and "etcd connections" in opened, opened
        text = wait_for(lambda: (t := scrape_metrics(port)) and f'finding="{FINDING}"' in t and t, timeout=60,
                        message="the exporter's finding series")
        assert "health" in probes_up(text) and "inventory" in probes_up(text)
        assert "crdscope_inventory_served_versions" in text

        restart_apiserver(lab)
        kubectl(state, "get", ",".join(names), "-o", "name")
        closed = wait_for(lambda: next((line for line in lines if "finding closed" in line
                                        and "API server holds" in line), None), timeout=180,
                          message=f"the finding closing once each member is listed once (so far: {lines[-5:]})")
        assert "etcd connections" in closed
    finally:
        stop_process(watch)
    print(f"\netcd connections: idle {idle['etcd_connections']}, {KINDS} kinds in use "
          f"{in_use['etcd_connections']}, etcd listed twice {doubled['etcd_connections']}\n{opened}\n{closed}")
