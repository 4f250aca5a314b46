"""Real Crossplane v2 in the lab: its core, its CLI and an OCI registry, built from Go modules.

``crdscope lab up --crossplane`` (or ``lab crossplane`` on a running lab) does what the Helm chart
would do, with plain processes instead of pods:

1. a registry on loopback (:mod:`lab.registry`: ``crane registry serve``, open; with ``--registry-auth``
   Debian's ``docker-registry`` asking for credentials), where ``crdscope package --push`` puts
   provider packages;
2. the namespace ``crossplane-system`` and the ServiceAccount ``crossplane`` (``core init`` creates
   neither, and the runtime controller waits for the ServiceAccount), and with ``--registry-auth``
   the registry's pull secret there;
3. ``crossplane core init``: TLS secrets, the core CRDs (shipped in the module's ``cluster/crds``),
   the Lock, the default DeploymentRuntimeConfig and the default MRAP of ``--activation``;
4. ``crossplane core start`` as a supervised process (``KUBECONFIG`` names the lab), webhooks off,
   its metrics and health ports fixed on free ports, its package cache in the run directory;
5. beside it, kube-controller-manager of the lab's minor with its Deployment and ReplicaSet
   controllers only (:mod:`lab.controllermanager`), so that provider Deployments get a status.

What differs from a cluster: no kubelet (and no Node), so a provider's Pod never runs: a runtime
scaled to zero (Crossplane v2.4's safe-start providers awaiting activation) is healthy, any other
never becomes healthy, while the revision's MRDs and CRDs install normally; no webhooks; one
replica without leader election.  The core is v2.4.2 unless ``--crossplane-version`` names v2.0;
the CLI (``crank``, the ``crossplane xpkg`` commands) and ``crane`` come from v2.0.0's module, the
last that holds the CLI (:mod:`toolchain.crossplane`).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Callable


from crdscope.base.errors import LabError
from crdscope.toolchain.crossplane import CrossplaneBinaries
from crdscope.base.labrecord import Component, pid_alive

from . import controllermanager, registry
from .processes import free_port, spawn, tail, wait_http

if TYPE_CHECKING:
    import httpx

    from .controlplane import Lab, LabState

NAMESPACE = "crossplane-system"
SERVICE_ACCOUNT = "crossplane"
#: The Helm chart's secret names: ``core init`` fills them, ``core start`` reads the client pair.
SECRETS = {"TLS_CA_SECRET_NAME": "crossplane-root-ca", "TLS_CLIENT_SECRET_NAME": "crossplane-tls-client",
           "TLS_SERVER_SECRET_NAME": "crossplane-tls-server"}
#: ``--activation`` patterns when none are given: the Helm chart's default (every MRD active).
DEFAULT_ACTIVATIONS = ("*",)
#: ``--activation none``: no default MRAP (a safe-start provider then activates nothing).
NO_ACTIVATION = "none"
READY_TIMEOUT_SECONDS = 90.0
INIT_TIMEOUT_SECONDS = 180.0
INIT_ATTEMPTS = 5


# --------------------------------------------------------------------------- running it


def activations_of(patterns: tuple[str, ...] | list[str]) -> list[str]:
    """The default MRAP's patterns: ``*`` when none are given, none for ``none``."""
    if not patterns:
        return list(DEFAULT_ACTIVATIONS)
    if NO_ACTIVATION in patterns:
        if len(patterns) > 1:
            raise LabError("--activation none means no default MRAP: give it alone", exit_code=2)
        return []
    return list(patterns)


def start(lab: Lab, state: LabState, binaries: CrossplaneBinaries, *, activations: list[str],
          say: Callable[[str], None], controllers: bool = True, registry_auth: bool = False) -> None:
    """Registry (``registry_auth``: one asking for credentials, :mod:`lab.registry`), namespace and
    ServiceAccount (and the registry's pull secret), kube-controller-manager (``controllers``; built on
    first use), ``core init``, then ``core start``; waits until healthy.

    Without ``controllers`` provider Deployments get no status, so Crossplane reports no runtime healthy
    and never writes ``RuntimeActive``: the fleet demo, about the API server's memory, does without (no
    extra client on a capped server, no build of the 1.26 controller manager)."""
    if "crossplane" in state.components and pid_alive(state.components["crossplane"].pid):
        raise LabError("Crossplane already runs in this lab (see `crdscope lab status`)")
    directory = Path(state.run_dir) / "crossplane"
    (directory / "xpkg-cache").mkdir(parents=True, exist_ok=True)
    registry.start_registry(lab, state, binaries, directory, say, authenticated=registry_auth)
    if controllers:
        _start_controller_manager(lab, state, say)
    env = _environment(state)
    _namespace_and_service_account(state)
    _core_init(binaries, env, activations, Path(state.run_dir) / "logs" / "crossplane-init.log")
    certs = directory / "tls-client"
    _write_client_certs(state, certs)
    metrics_port, health_port = free_port(), free_port()
    core = Component(
        name="crossplane", role="crossplane", port=health_port,
        argv=[str(binaries.crossplane), "core", "start", f"--namespace={NAMESPACE}",
              f"--xpkg-cache-dir={directory / 'xpkg-cache'}", "--enable-webhooks=false",
              f"--metrics-port={metrics_port}", f"--health-probe-port={health_port}",
              f"--tls-client-certs-dir={certs}"],
        log=str(Path(state.run_dir) / "logs" / "crossplane.log"), env=env,
    )
    state.components["crossplane"] = core
    state.crossplane_version = binaries.version
    state.crossplane_metrics_port = metrics_port
    spawn(core)
    lab.save(state)
    if not wait_healthy(core):
        raise LabError(f"crossplane core did not become healthy; last lines of {core.log}:", detail=tail(core.log))
    say(f"crossplane {binaries.version} core running (health :{health_port}, metrics :{metrics_port})")


def _start_controller_manager(lab: Lab, state: LabState, say: Callable[[str], None]) -> None:
    """The Deployment controller of the lab's minor (built on first use), or a line saying why none runs."""
    from .binaries import controller_manager, minor_of, supported_minors

    minor = minor_of(state.kubernetes_version)
    if minor not in supported_minors():
        say(f"no kube-controller-manager for Kubernetes {state.kubernetes_version or '(unknown)'}: provider "
            "Deployments get no status, so Crossplane reports no provider runtime healthy")
        return
    controllermanager.start(lab, state, controller_manager(minor, progress=say), say)


def _environment(state: LabState) -> dict[str, str]:
    # controller-runtime reads KUBECONFIG; kong reads the rest from the environment like the chart sets it.
    return {"KUBECONFIG": state.kubeconfig, "POD_NAMESPACE": NAMESPACE, "POD_SERVICE_ACCOUNT": SERVICE_ACCOUNT,
            "WEBHOOK_ENABLED": "false", **SECRETS}


def wait_healthy(core: Component, timeout: float = READY_TIMEOUT_SECONDS) -> bool:
    """True once ``core start`` answers its health probe."""
    return wait_http(core, timeout)


def _admin_client(state: LabState) -> httpx.Client:
    import httpx

    from .controlplane import admin_tls

    return httpx.Client(base_url=state.server, verify=admin_tls(state.pki_dir), timeout=30)


def _namespace_and_service_account(state: LabState) -> None:
    """What the chart creates before ``core init``: the namespace and the ServiceAccount; and the pull
    secret of the lab's registry when it asks for credentials (replaced: its password is this run's)."""
    import httpx

    documents: list[tuple[str, dict[str, Any]]] = [
        ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        (f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts",
         {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE}})]
    secret = registry.pull_secret(state, NAMESPACE)
    if secret is not None:
        documents.append((f"/api/v1/namespaces/{NAMESPACE}/secrets", secret))
    try:
        with _admin_client(state) as client:
            for path, body in documents:
                response = client.post(path, json=body)
                if response.status_code == 409 and body["kind"] == "Secret":
                    response = client.put(f"{path}/{body['metadata']['name']}", json=body)
                if response.status_code not in (200, 201, 409):  # 409: there from an earlier run
                    raise LabError(f"cannot create {body['kind']} {body['metadata']['name']} in {NAMESPACE}: "
                                   f"HTTP {response.status_code}")
    except httpx.HTTPError as exc:
        raise LabError(f"cannot reach the lab's API server: {exc}") from None


def _core_init(binaries: CrossplaneBinaries, env: dict[str, str], activations: list[str], log: Path) -> None:
    """``crossplane core init``, run again on failure as a kubelet reruns a failed init container.

    It applies the core CRDs and then objects of them (the Lock, the default MRAP) at once; its
    client's discovery may not know the new kinds yet ("no matches for kind"), and a rerun passes.
    """
    argv = [str(binaries.crossplane), "core", "init", *(f"--activation={pattern}" for pattern in activations)]
    # kong spells the field CRDsPath as --cr-ds-path; the chart sets the variable, and so do we.
    environment = {**os.environ, **env, "CRDS_PATH": str(binaries.crds)}
    deadline = time.monotonic() + INIT_TIMEOUT_SECONDS
    for attempt in range(1, INIT_ATTEMPTS + 1):
        with open(log, "ab") as handle:
            try:
                done = subprocess.run(argv, env=environment, stdin=subprocess.DEVNULL, stdout=handle,
                                      stderr=subprocess.STDOUT, timeout=max(1.0, deadline - time.monotonic()),
                                      check=False)
            except subprocess.TimeoutExpired:
                raise LabError(f"crossplane core init took over {INIT_TIMEOUT_SECONDS:.0f}s; see {log}") from None
        if done.returncode == 0:
            return
        if attempt < INIT_ATTEMPTS and time.monotonic() < deadline:
            time.sleep(attempt)  # a kubelet's back-off, shortened
    raise LabError(f"crossplane core init failed {INIT_ATTEMPTS} times (exit {done.returncode}); last lines of "
                   f"{log}:", detail=tail(log))


def _write_client_certs(state: LabState, directory: Path) -> None:
    """``ca.crt``, ``tls.crt`` and ``tls.key`` out of the client secret ``core init`` filled."""
    import base64

    with _admin_client(state) as client:
        response = client.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/{SECRETS['TLS_CLIENT_SECRET_NAME']}")
    if response.status_code != 200:
        raise LabError(f"core init left no client TLS secret (HTTP {response.status_code})")
    data: dict[str, Any] = response.json().get("data") or {}
    directory.mkdir(parents=True, exist_ok=True)
    for key in ("ca.crt", "tls.crt", "tls.key"):
        if key not in data:
            raise LabError(f"the client TLS secret has no {key}")
        path = directory / key
        path.write_bytes(base64.b64decode(data[key]))
        path.chmod(0o600)


def status(state: LabState) -> dict[str, Any]:
    """Crossplane's part of ``lab status``: version, registry and whether the core is healthy."""
    core, registry_component = state.components.get("crossplane"), state.components.get("registry")
    if core is None and registry_component is None:
        return {}
    import httpx

    healthy = False
    if core is not None and pid_alive(core.pid):
        try:
            healthy = httpx.get(f"http://127.0.0.1:{core.port}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            healthy = False
    return {"crossplane": {"version": state.crossplane_version, "healthy": healthy,
                           "metrics_port": state.crossplane_metrics_port,
                           "registry": f"127.0.0.1:{registry_component.port}" if registry_component is not None
                           else None,
                           "registry_config": state.registry_config or None,
                           "pull_secret": f"{NAMESPACE}/{registry.PULL_SECRET}" if state.registry_config else None}}
