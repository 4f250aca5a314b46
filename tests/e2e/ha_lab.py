"""A lab of two kube-apiservers behind haproxy (``lab up --apiservers 2``), for the HA tests."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import LabHandle


def start_ha_lab(home: Path, binaries, replicas: int = 2) -> LabHandle:
    from crdscope.lab.controlplane import Lab, LabOptions

    the_lab = Lab(home)
    state = the_lab.up(binaries, options=LabOptions(apiservers=replicas))
    return LabHandle(lab=the_lab, state=state, kubeconfig=state.kubeconfig)


def admin_context(lab: LabHandle) -> ssl.SSLContext:
    pki = Path(lab.state.run_dir) / "pki"
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    return context


def replica_port(lab: LabHandle, index: int) -> int:
    from crdscope.lab.controlplane import replica_name

    return lab.lab.require().components[replica_name(index)].port


def replica_metrics(lab: LabHandle, index: int) -> dict[str, list[tuple[dict, float]]]:
    """Replica ``index``'s own /metrics (on its port, not through haproxy), parsed by prometheus_client."""
    text = httpx.get(f"https://127.0.0.1:{replica_port(lab, index)}/metrics", verify=admin_context(lab),
                     timeout=30).text
    samples: dict[str, list[tuple[dict, float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def start_time_of(lab: LabHandle, index: int) -> float:
    """process_start_time_seconds of replica ``index``, read on its own port."""
    ((_, value),) = replica_metrics(lab, index)["process_start_time_seconds"]
    return value
