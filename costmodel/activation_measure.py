"""``crdscope estimate --activate PATTERN --measure``: an MRAP's cost, measured through real Crossplane.

The prediction reads the cluster's MRDs; the measurement replays them on a fresh named lab with
real Crossplane v2 (no default MRAP): the selected MRDs' CRDs become one ``safe-start`` provider
package (the real ``crossplane xpkg``, pushed to the lab's registry), a Provider installs it (its
MRDs appear, all Inactive, no CRD created), the "before" figures are read, an MRAP with the same
patterns activates them, and once every CRD is Established and the server idle, the "after"
figures.  The lab is taken down whatever happens (an error, Ctrl-C).

The waits read the MRDs as a Table (name, STATE, ESTABLISHED: a few hundred bytes each, where a full
MRD list carries every schema, tens of MB, every second) and the CRDs' names as metadata; the full CRD
list is read once, at the end, for when each became Established.  The activation's time runs from
the MRAP's POST to the last of the selection's CRDs' Established transitions (its ``lastTransitionTime``,
whole seconds: the middle of that second is taken), so the polls' cadence does not count in it.

Synchronous and blocking like :mod:`costmodel.measure`, whose snapshot and comparison it reuses.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from crdscope.base.errors import CrdscopeError
from crdscope.connection.credentials import parse_rfc3339
from crdscope.connection.crossplane_read import METADATA_ACCEPT, TABLE_ACCEPT, parse_mrd_table

from .measure import INSTALL_GOAL, Comparison, compare, snapshot, wait_until_idle
from .model import ACTIVATION, Estimate
from .mrds import MRD_PATH, MRDSelection

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PROVIDER_PATH = "/apis/pkg.crossplane.io/v1/providers"
MRAP_PATH = "/apis/apiextensions.crossplane.io/v1alpha1/managedresourceactivationpolicies"
PACKAGE_NAME = "provider-estimate"
#: Pulling, unpacking and turning a package's CRDs into MRDs; then activating them all: this long, and
#: this much more per MRD (817 GCP MRDs took minutes on a busy 2-core machine).
INSTALL_TIMEOUT_SECONDS = 300.0
ACTIVATION_TIMEOUT_SECONDS = 300.0
TIMEOUT_SECONDS_PER_MRD = 1.0
#: The OpenAPI v3 controller publishes Established CRDs some seconds later (tens of seconds on a busy
#: server): the "after" figures wait for it, else they would miss what the activation added.
PUBLICATION_TIMEOUT_SECONDS = 300.0
POLL_SECONDS = 1.0
#: compare()'s rows that do not fit an activation: the legacy walk's absolute length (the fresh lab
#: is not the cluster) and the loader's install time (Crossplane activates, not the loader).
NOT_COMPARED = ("legacy walk requests", "install time (loader defaults)")


class ActivationMeasureError(CrdscopeError):
    """The measurement lab did not do what Crossplane should have done."""


@dataclass(frozen=True)
class ActivationMeasurement:
    """Figures of the measurement lab before and after the MRAP, and how long activation took."""

    kubernetes_version: str
    crossplane_version: str
    package: str
    before: dict[str, Any]
    after: dict[str, Any]
    #: From the MRAP's POST to the last selected CRD's Established transition (its stamp, +-0.5 s).
    activation_seconds: float


#: The activation's time, predicted (through the activation path) against measured.
ACTIVATION_TIME = "MRAP to all Established"


def compare_activation(predicted: Estimate, before: dict[str, Any], after: dict[str, Any],
                       activation_seconds: float | None = None) -> list[Comparison]:
    """Predicted against measured for an activation: CRDs and group-versions added (exact), then the
    figures of :func:`compare` that are growths (memory, discovery, OpenAPI, etcd), then the time from
    the MRAP's apply to every CRD Established (when ``predicted`` priced the activation path)."""

    def grew(name: str) -> float | None:
        if before.get(name) is None or after.get(name) is None:
            return None
        return float(after[name] - before[name])

    # Each group-version served adds one request to the legacy walk: its growth counts them on any minor.
    added = [Comparison("CRDs added", "CRDs", float(predicted.crds), None, None, grew("crds"), 0.0),
             Comparison("group-versions added", "group-versions", float(predicted.group_versions_added), None, None,
                        grew("legacy_requests"), 0.0)]
    grown = [row for row in compare(predicted, before, after, None) if row.figure not in NOT_COMPARED]
    if predicted.path != ACTIVATION:
        return added + grown
    seconds = predicted.install_seconds
    return added + grown + [Comparison(ACTIVATION_TIME, "s", seconds.value, seconds.low, seconds.high,
                                       activation_seconds, INSTALL_GOAL)]


#: Called with "before" or "after" and the lab's state once that point's figures are read (a benchmark
#: keeps the server's heap profile there).
AtPoint = Callable[[str, Any], None]


def measure_activation(selection: MRDSelection, minor: str, *, say: Callable[[str], None],
                       lab_name: str | None = None, at_point: AtPoint | None = None) -> ActivationMeasurement:
    """Bring up a named lab with Crossplane, install the selection as a safe-start package, measure the
    MRAP of ``selection.patterns``, take the lab down (also on failure)."""
    from crdscope.lab import crossplane
    from crdscope.toolchain import crossplane as toolchain_crossplane
    from crdscope.lab.controlplane import Lab, LabOptions

    if not selection.documents:
        raise ActivationMeasureError("--measure: no inactive MRD to activate")
    xp = toolchain_crossplane.crossplane_binaries(progress=say)  # before the lab: a cold build takes minutes
    binaries = _control_plane(minor, say)
    name = lab_name or f"estimate-{os.getpid()}"
    lab = Lab(name=name)
    state = lab.up(binaries, say=say, options=LabOptions(name=name))
    try:
        crossplane.start(lab, state, xp, activations=[], say=say)
        with tempfile.TemporaryDirectory(prefix="crdscope-activate-") as work:
            reference = _package(selection, Path(work), f"127.0.0.1:{state.components['registry'].port}", say)
        return _install_and_activate(state, selection, reference, xp.version, say, at_point)
    finally:
        lab.down()
        with contextlib.suppress(OSError):  # its named home, empty now: leave nothing behind
            lab.home.rmdir()


def _control_plane(minor: str, say: Callable[[str], None]) -> Any:
    """The built binaries of ``minor``, else the newest (built when none is)."""
    from crdscope.lab.binaries import cached_binaries, ensure_binaries, versions_for
    from crdscope.base.errors import LabError

    try:
        found = cached_binaries(versions_for(minor))
    except LabError:
        found = None
    if found is None:
        say(f"--measure: Kubernetes {minor} is not built for the lab; measuring on the newest")
        return ensure_binaries(progress=say)
    return found


def _package(selection: MRDSelection, work: Path, registry: str, say: Callable[[str], None]) -> str:
    """The selection's CRDs as one safe-start package pushed to ``registry``; its reference."""
    from crdscope.loader.package import build_packages
    from crdscope.loader.sources import open_source

    crds = work / "crds"
    crds.mkdir()
    for document in selection.documents:
        (crds / f"{document['metadata']['name']}.json").write_text(json.dumps(document))
    run = build_packages(open_source(str(crds)), name=PACKAGE_NAME, safe_start=True, push=True, registry=registry,
                         output=work / "packages", say=say)
    [built] = run.packages
    assert built.reference is not None  # pushed
    return built.reference


def _install_and_activate(state: Any, selection: MRDSelection, reference: str, crossplane_version: str,
                          say: Callable[[str], None], at_point: AtPoint | None = None) -> ActivationMeasurement:
    from crdscope.lab.controlplane import admin_tls
    from crdscope.lab.sockets import established_to_port

    apiserver, etcd = state.components["apiserver"], state.components["etcd"]
    tls = admin_tls(state.pki_dir)
    wanted = set(selection.names)

    def etcd_connections() -> int:
        return established_to_port(apiserver.pid, etcd.port)

    def point(name: str) -> dict[str, Any]:
        wait_until_idle(apiserver.pid)
        figures = {**snapshot(state.server, tls, etcd_connections), "crds": len(_crd_names(client))}
        if at_point is not None:
            at_point(name, state)
        return figures

    with httpx.Client(base_url=state.server, verify=tls, timeout=60) as client:
        _create(client, PROVIDER_PATH, {"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider",
                                        "metadata": {"name": PACKAGE_NAME}, "spec": {"package": reference}})
        say(f"--measure: Provider {PACKAGE_NAME} installs {reference}; waiting for its {len(wanted)} MRDs")
        _wait(lambda: _inactive_mrds(client, wanted), INSTALL_TIMEOUT_SECONDS + TIMEOUT_SECONDS_PER_MRD * len(wanted),
              f"Crossplane did not create the {len(wanted)} MRDs of {reference}")
        # A fresh server builds its OpenAPI v2 document and discovery answers on the first snapshot's
        # requests (41 MiB RSS on 1.37 with Crossplane's core): the cluster predicted for did long ago.
        wait_until_idle(apiserver.pid)
        snapshot(state.server, tls, etcd_connections)
        before = point("before")
        posted = time.time()
        _create(client, MRAP_PATH, {"apiVersion": "apiextensions.crossplane.io/v1alpha1",
                                    "kind": "ManagedResourceActivationPolicy", "metadata": {"name": "estimate"},
                                    "spec": {"activate": list(selection.patterns)}})
        say(f"--measure: MRAP {' '.join(selection.patterns)} applied; waiting for {len(wanted)} CRDs Established")
        _wait(lambda: _all_established(client, wanted),
              ACTIVATION_TIMEOUT_SECONDS + TIMEOUT_SECONDS_PER_MRD * len(wanted),
              f"the MRAP's {len(wanted)} CRDs were not all Established")
        # The server stamps whole seconds: the last transition came within the second it names.
        seconds = max(0.0, _last_established(client, wanted) + 0.5 - posted)
        paths = _openapi_paths(selection)
        _wait(lambda: paths <= set(client.get("/openapi/v3").json().get("paths") or {}), PUBLICATION_TIMEOUT_SECONDS,
              f"the OpenAPI v3 index did not list the {len(paths)} group-versions activated")
        after = point("after")
    return ActivationMeasurement(state.kubernetes_version, crossplane_version, reference, before, after, seconds)


def _openapi_paths(selection: MRDSelection) -> set[str]:
    """The ``/openapi/v3`` index paths of the group-versions the selection serves."""
    return {f"apis/{document['spec']['group']}/{version['name']}" for document in selection.documents
            for version in document["spec"].get("versions") or [] if version.get("served")}


def _create(client: httpx.Client, path: str, body: dict[str, Any]) -> None:
    response = client.post(path, json=body)
    if response.status_code != 201:
        raise ActivationMeasureError(f"--measure: cannot create {body['kind']} {body['metadata']['name']}: "
                                     f"HTTP {response.status_code} {response.text[:200]}")


def _crd_names(client: httpx.Client) -> set[str]:
    """The names of the lab's CRDs (their metadata only)."""
    response = client.get(CRD_PATH, headers={"Accept": METADATA_ACCEPT})
    response.raise_for_status()
    return {crd["metadata"]["name"] for crd in response.json().get("items") or []}


def _mrd_rows(client: httpx.Client) -> dict[str, tuple[str, bool]] | None:
    """Every MRD's (STATE, ESTABLISHED) from the MRD Table; None while MRDs are not served yet."""
    response = client.get(MRD_PATH, headers={"Accept": TABLE_ACCEPT})
    if response.status_code == 404:  # the core's CRDs are there since `core init`: a 404 is transient
        return None
    response.raise_for_status()
    return {row.name: (row.state or "Inactive", row.established) for row in parse_mrd_table(response.json())}


def _inactive_mrds(client: httpx.Client, wanted: set[str]) -> bool:
    """True once every wanted MRD exists; an error if any is Active or has a CRD already (no safe-start)."""
    rows = _mrd_rows(client)
    if rows is None or not wanted <= set(rows):
        return False
    early = sorted(n for n in wanted if rows[n][0] != "Inactive") or sorted(wanted & _crd_names(client))
    if early:
        raise ActivationMeasureError(f"--measure: {early[0]} was activated before the MRAP (safe-start ignored?)")
    return True


def _all_established(client: httpx.Client, wanted: set[str]) -> bool:
    """True once Crossplane says every wanted MRD is Active and its CRD Established."""
    rows = _mrd_rows(client) or {}
    return all(rows.get(name, ("", False)) == ("Active", True) for name in wanted)


def _last_established(client: httpx.Client, wanted: set[str]) -> float:
    """When the last of the wanted CRDs became Established (the server's ``lastTransitionTime``)."""
    response = client.get(CRD_PATH)
    response.raise_for_status()
    times = {}
    for crd in response.json().get("items") or []:
        for condition in (crd.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "Established" and condition.get("status") == "True":
                times[crd["metadata"]["name"]] = parse_rfc3339(condition.get("lastTransitionTime") or "")
    missing = sorted(wanted - set(times))
    if missing:
        raise ActivationMeasureError(f"--measure: {missing[0]} is not Established although its MRD says so")
    return max(times[name] for name in wanted)


def _wait(condition: Callable[[], bool], timeout: float, failure: str) -> None:
    """Poll ``condition`` until true; past ``timeout`` a one-line error."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except httpx.HTTPStatusError as exc:
            # APF rejects a poll while the fresh lab installs (429, seen in CI): asked again, as
            # client-go retries a 429; any other status is the server failing.
            if exc.response.status_code != 429:
                raise ActivationMeasureError(f"--measure: the lab's API server failed: {exc}") from None
        except httpx.HTTPError as exc:
            raise ActivationMeasureError(f"--measure: the lab's API server failed: {exc}") from None
        if time.monotonic() > deadline:
            raise ActivationMeasureError(f"--measure: {failure} within {timeout:.0f}s")
        time.sleep(POLL_SECONDS)

