"""Benchmark: what the API server's etcd connections grow with, minor by minor.

``python -m bench etcd_connections [--kubernetes 1.26,1.33,1.37] [--crds 50,200] [--kinds 10,50,150]``

The published CRD-scale reports counted one etcd connection per CRD (1,937 for 1,878 CRDs);
bench/RESULTS.md measured none added per CRD *installed* on any minor 1.26-1.37, while
tests/e2e/test_latency.py saw 1.37 open about one per kind on that kind's first request.  This
separates the two, on a fresh lab per minor with tiny CRDs (one group, one version, cluster
scope, no schema to speak of), counting the API server's established TCP connections to etcd
from /proc (``lab/sockets.py``, what the health probe reads on a lab):

1. ``idle``: 0 CRDs, nothing asked;
2. ``installed``: after each step of ``--crds`` (cumulative), all Established, none requested;
3. ``listed``: after a first ``LIST ?limit=1`` of each of the first K kinds (each step of
   ``--kinds``, cumulative): the connections per kind in use;
4. ``created``: one object created in ``--created`` kinds never listed (a create also brings a
   kind into use), and what the health probe would see of the kinds in use: the CRDs with a
   series in the object-count family, and those with a count above 0;
5. ``updated``: ``--updates`` spec updates of one kind in use (a CRD update replaces the kind's
   storage), each followed by a LIST of that kind (its new storage): a storage not torn down
   would leave its connection behind, one per round;
6. ``recreated``: ``--recreated`` rounds of deleting one CRD in use, creating it again and
   listing it (a new UID, a new storage);
7. ``etcd-restarted``: etcd killed and started again on its port (every client reconnects);
8. ``listed-multiversion``: ``--multiversion`` CRDs serving 2 versions, then as many serving 3,
   each listed once at one version (a storage per version served, or one per kind?);
9. ``deleted``: ``--deleted`` CRDs in use deleted, once settled;
10. ``etcd-listed-twice``: the API server restarted with its etcd member in ``--etcd-servers`` twice
   (by address and by name) and its kinds in use listed again: what more connections than the
   design look like (each storage's client connects to every endpoint it is given).

Each figure is the count once it stood still for :data:`STEADY_SECONDS` (at most
:data:`SETTLE_TIMEOUT` seconds), with every count seen on the way in the JSON
(``bench/results/etcd-connections-<stamp>.json``); the per-minor model the
``etcd-connections`` finding judges by (``findings/etcd_model.py``) is fitted from these.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from crdscope.connection.metrics import parse_text
from crdscope.lab.binaries import Binaries, binary_version, find_binaries
from crdscope.lab.controlplane import Lab, LabState, admin_tls
from crdscope.lab.sockets import established_to_port

from .common import BENCH_DIR, BenchError, isolate_environment, machine, say

GROUP = "etcdconn.bench.crdscope.dev"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
OBJECT_FAMILIES = ("apiserver_resource_objects", "apiserver_storage_objects")
#: A count is taken once it stood still this long ...
STEADY_SECONDS = 5.0
#: ... or after this long (a replaced storage is torn down once its requests drain: up to a minute).
SETTLE_TIMEOUT = 120.0
POLL_SECONDS = 0.5


#: Versions a multi-version CRD serves (the last one stored; the bench lists the first).
VERSIONS = ("v1", "v1beta1", "v1alpha1")


def tiny_crd(index: int, versions: int = 1) -> dict[str, Any]:
    """CRD number ``index`` of the bench's group: cluster scope, ``versions`` versions, any fields."""
    kind = f"Conn{index:04d}"
    plural = kind.lower() + "s"
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Cluster",
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
                     "versions": [{"name": name, "served": True, "storage": i == 0, "schema": schema}
                                  for i, name in enumerate(VERSIONS[:versions])]}}


def plural(index: int) -> str:
    return f"conn{index:04d}s"


class Counter:
    """The lab API server's etcd connections, counted from /proc, and every count seen."""

    def __init__(self, state: LabState) -> None:
        self.pid = state.components["apiserver"].pid
        self.port = state.components["etcd"].port
        self.started = time.monotonic()

    def now(self) -> int:
        return established_to_port(self.pid, self.port)

    def settled(self) -> tuple[int, list[tuple[float, int]]]:
        """The count once it stood still for :data:`STEADY_SECONDS`, and the counts on the way."""
        seen: list[tuple[float, int]] = []
        deadline = time.monotonic() + SETTLE_TIMEOUT
        since = time.monotonic()
        while True:
            count = self.now()
            now = time.monotonic()
            if seen and count != seen[-1][1]:
                since = now
            if not seen or count != seen[-1][1]:
                seen.append((round(now - self.started, 2), count))
            if now - since >= STEADY_SECONDS or now > deadline:
                return count, seen
            time.sleep(POLL_SECONDS)


def _client(state: LabState) -> httpx.Client:
    return httpx.Client(base_url=state.server, verify=admin_tls(state.pki_dir), timeout=120)


def _ok(response: httpx.Response, what: str) -> httpx.Response:
    if response.status_code >= 300:
        raise BenchError(f"{what} answered {response.status_code}: {response.text[:200]}")
    return response


def install(client: httpx.Client, indices: range, versions: int = 1) -> None:
    """Create the CRDs and wait until every one of them is Established."""
    for index in indices:
        _ok(client.post(CRD_PATH, json=tiny_crd(index, versions)), f"creating CRD {index}")
    wanted = {f"{plural(i)}.{GROUP}" for i in indices}
    deadline = time.monotonic() + 600
    while True:
        items = _ok(client.get(CRD_PATH), "listing CRDs").json()["items"]
        established = {item["metadata"]["name"] for item in items
                       if any(c.get("type") == "Established" and c.get("status") == "True"
                              for c in (item.get("status") or {}).get("conditions") or [])}
        if wanted <= established:
            return
        if time.monotonic() > deadline:
            raise BenchError(f"{len(wanted - established)} CRDs not Established after 600 s")
        time.sleep(1)


def first_list(client: httpx.Client, indices: range) -> None:
    """A first LIST ?limit=1 of each kind (as ``kubectl get`` sends): the server builds its storage."""
    for index in indices:
        _ok(client.get(f"/apis/{GROUP}/v1/{plural(index)}", params={"limit": "1"}), f"listing {plural(index)}")


def create_object(client: httpx.Client, index: int) -> None:
    body = {"apiVersion": f"{GROUP}/v1", "kind": f"Conn{index:04d}", "metadata": {"name": "one"}}
    _ok(client.post(f"/apis/{GROUP}/v1/{plural(index)}", json=body), f"creating a {plural(index)}")


def object_series(client: httpx.Client) -> dict[str, int]:
    """The bench group's resources in the object-count family (``plural.group`` -> count)."""
    scrape = parse_text(_ok(client.get("/metrics"), "/metrics").content, OBJECT_FAMILIES)
    for family in OBJECT_FAMILIES:
        found = {(f"{resource}.{group}" if group else resource): int(value)
                 for (group, resource), value in scrape.by(family, "group", "resource").items()}
        # Before 1.37 the family has only a "resource" label, already "plural.group".
        found |= {resource: int(value) for (resource,), value in scrape.by(family, "resource").items()}
        if found:
            return {name: count for name, count in found.items() if name.endswith("." + GROUP)}
    return {}


def update_spec(client: httpx.Client, index: int, round_: int) -> None:
    """A spec change that replaces the kind's storage (a printer column), as a provider upgrade does."""
    name = f"{plural(index)}.{GROUP}"
    crd = _ok(client.get(f"{CRD_PATH}/{name}"), f"reading {name}").json()
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = [
        {"name": f"round{round_}", "type": "string", "jsonPath": ".metadata.name"}]
    _ok(client.put(f"{CRD_PATH}/{name}", json=crd), f"updating {name}")


def recreate(client: httpx.Client, index: int) -> None:
    """Delete a CRD, create it again (a new UID) and list it: its storage is built afresh."""
    delete_crds(client, range(index, index + 1))
    install(client, range(index, index + 1))
    first_list(client, range(index, index + 1))


def delete_crds(client: httpx.Client, indices: range) -> None:
    for index in indices:
        _ok(client.delete(f"{CRD_PATH}/{plural(index)}.{GROUP}"), f"deleting CRD {index}")
    deadline = time.monotonic() + 300
    wanted = {f"{plural(i)}.{GROUP}" for i in indices}
    while wanted & {item["metadata"]["name"] for item in _ok(client.get(CRD_PATH), "listing CRDs").json()["items"]}:
        if time.monotonic() > deadline:
            raise BenchError("deleted CRDs still listed after 300 s")
        time.sleep(1)


@dataclasses.dataclass
class Installed:
    """What the lab holds at a step: each CRD's versions served, and the kinds in use."""

    versions: dict[int, int] = dataclasses.field(default_factory=dict)
    in_use: set[int] = dataclasses.field(default_factory=set)

    def figures(self) -> dict[str, int]:
        return {"crds": len(self.versions), "served_versions": sum(self.versions.values()),
                "kinds_in_use": len(self.in_use), "versions_in_use": sum(self.versions[i] for i in self.in_use)}


class Steps:
    """The steps of one minor, each with its settled count and what was installed and in use, in order."""

    def __init__(self, counter: Counter, client: httpx.Client) -> None:
        self.counter = counter
        self.client = client
        self.held = Installed()
        self.rows: list[dict[str, Any]] = []

    def record(self, step: str, **extra: Any) -> None:
        count, seen = self.counter.settled()
        series = object_series(self.client)
        held = self.held.figures()
        self.rows.append({"step": step, **held, "connections": count, "object_series": len(series),
                          "object_series_above_0": sum(1 for c in series.values() if c > 0),
                          "counts_seen": seen, **extra})
        say(f"{step}: {count} etcd connections ({held['crds']} CRDs serving {held['served_versions']} versions; "
            f"{held['kinds_in_use']} kinds in use, {held['versions_in_use']} versions; {len(series)} with an "
            "object-count series)")


def measure_minor(lab: Lab, state: LabState, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every step on one fresh lab (see the module's docstring)."""
    with _client(state) as client:
        steps = Steps(Counter(state), client)
        held = steps.held
        steps.record("idle")
        for total in args.crds:
            added = range(len(held.versions), total)
            install(client, added)
            held.versions.update(dict.fromkeys(added, 1))
            steps.record("installed")
        for total in [k for k in args.kinds if k <= len(held.versions)]:
            used = range(len(held.in_use), total)
            first_list(client, used)
            held.in_use.update(used)
            steps.record("listed")
        fresh = range(len(held.in_use), min(len(held.versions), len(held.in_use) + args.created))
        for index in fresh:
            create_object(client, index)
        held.in_use.update(fresh)
        steps.record("created", created_in=len(fresh))
        churn(lab, state, steps, args)
        for versions in (2, 3):  # a multi-version CRD: a storage per version served, or one?
            added = range(max(held.versions) + 1, max(held.versions) + 1 + args.multiversion)
            install(client, added, versions)
            first_list(client, added)
            held.versions.update(dict.fromkeys(added, versions))
            held.in_use.update(added)
            steps.record("listed-multiversion", versions=versions)
        gone = range(min(args.deleted, len(held.in_use)))  # the first CRDs: one version each, in use
        delete_crds(client, gone)
        for index in gone:
            del held.versions[index]
            held.in_use.discard(index)
        steps.record("deleted")
        etcd_listed_twice(lab, state, steps)
    return steps.rows


def etcd_listed_twice(lab: Lab, state: LabState, steps: Steps) -> None:
    """The API server restarted with its etcd member given twice (``--etcd-servers`` by address and by
    name): every storage's client connects to each endpoint.  Its kinds in use are listed again (a
    restart builds their storages afresh, at their next request)."""
    apiserver = state.components["apiserver"]
    apiserver.argv.append(f"--etcd-servers=http://localhost:{state.components['etcd'].port}")
    lab.save(state)
    lab.kill("apiserver")
    lab.start("apiserver")
    steps.counter.pid = lab.require().components["apiserver"].pid
    for index in sorted(steps.held.in_use):
        first_list(steps.client, range(index, index + 1))
    steps.record("etcd-listed-twice", etcd_servers=2)


def churn(lab: Lab, state: LabState, steps: Steps, args: argparse.Namespace) -> None:
    """What could leave connections behind: storages replaced by updates and re-creations, and etcd
    restarted under every client."""
    for round_ in range(args.updates):
        update_spec(steps.client, 0, round_)
        steps.rows.append({"step": "updated-at-once", "round": round_ + 1, "connections": steps.counter.now()})
        first_list(steps.client, range(1))
        steps.record("updated", round=round_ + 1)
    for round_ in range(args.recreated):
        recreate(steps.client, 1)
        steps.record("recreated", round=round_ + 1)
    lab.kill("etcd")
    lab.start("etcd")
    steps.counter.port = state.components["etcd"].port
    steps.record("etcd-restarted")


def fit(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Baseline, connections per CRD installed and per served version in use, from one minor's settled rows."""
    settled = [r for r in rows if "counts_seen" in r]
    idle = settled[0]["connections"]
    installed = [r for r in settled if r["step"] == "installed"]
    per_crd = (installed[-1]["connections"] - idle) / installed[-1]["crds"] if installed else None
    base = installed[-1]["connections"] if installed else idle
    twice = [r for r in settled if r["step"] == "etcd-listed-twice"]
    settled = [r for r in settled if r not in twice]
    in_use = [r for r in settled if r["versions_in_use"] and r["step"] not in ("idle", "installed")]
    per_version = [(r["connections"] - base) / r["versions_in_use"] for r in in_use]
    excess = [r["connections"] - base - r["versions_in_use"] for r in in_use]
    return {"idle": idle, "baseline": base,
            "per_crd_installed": round(per_crd, 3) if per_crd is not None else None,
            "per_version_in_use": round(statistics.median(per_version), 3) if per_version else None,
            "per_version_in_use_range": [round(min(per_version), 3), round(max(per_version), 3)]
            if per_version else None,
            "beyond_baseline_plus_versions_in_use": [min(excess), max(excess)] if excess else None,
            "etcd_listed_twice_over_design": round(twice[0]["connections"] / (base + twice[0]["versions_in_use"]), 2)
            if twice else None}


def binaries_for(wanted: str) -> Binaries:
    """A built minor (``1.26``), or a directory holding ``kube-apiserver`` and ``etcd`` (a build the
    lab does not list yet, e.g. a beta)."""
    directory = Path(wanted).expanduser()
    if directory.is_dir():
        apiserver = directory / "kube-apiserver"
        return Binaries(apiserver, directory / "etcd", "flags", binary_version(apiserver))
    binaries = find_binaries(None, None, wanted)
    if binaries is None:
        raise BenchError(f"Kubernetes {wanted} is not built: crdscope lab build --kubernetes {wanted}")
    return binaries


def run_minor(minor: str, args: argparse.Namespace) -> dict[str, Any]:
    binaries = binaries_for(minor)
    with tempfile.TemporaryDirectory(prefix="crdscope-bench-etcdconn-") as home:
        lab = Lab(Path(home) / "lab")
        state = lab.up(binaries, say=say)
        try:
            say(f"{minor}: {state.kubernetes_version} up")
            rows = measure_minor(lab, state, args)
        finally:
            lab.down()
    return {"kubernetes": state.kubernetes_version, "rows": rows, "fit": fit(rows)}


def _ints(text: str) -> list[int]:
    return sorted(int(part) for part in text.split(",") if part.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench etcd_connections", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubernetes", default="1.26,1.33,1.37",
                        help="built minors, or directories holding kube-apiserver and etcd [default: 1.26,1.33,1.37]")
    parser.add_argument("--crds", type=_ints, default=[50, 200], help="CRDs installed, cumulative steps")
    parser.add_argument("--kinds", type=_ints, default=[10, 50, 150], help="kinds listed once, cumulative steps")
    parser.add_argument("--created", type=int, default=20, help="kinds brought into use by a create")
    parser.add_argument("--updates", type=int, default=5, help="spec updates of one kind in use, each listed")
    parser.add_argument("--recreated", type=int, default=5, help="rounds of deleting, creating and listing one CRD")
    parser.add_argument("--multiversion", type=int, default=10,
                        help="CRDs serving 2 versions, then as many serving 3, each listed once")
    parser.add_argument("--deleted", type=int, default=20, help="CRDs in use deleted at the end")
    parser.add_argument("--output", type=Path, default=BENCH_DIR / "results")
    args = parser.parse_args(argv)
    isolate_environment()
    minors = {}
    for minor in [m.strip() for m in args.kubernetes.split(",") if m.strip()]:
        minors[minor] = run_minor(minor, args)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    document = {"name": "etcd-connections", "when": stamp, "machine": machine(),
                "options": {k: v for k, v in vars(args).items() if k != "output"},
                "minors": minors}
    args.output.mkdir(parents=True, exist_ok=True)
    path = args.output / f"etcd-connections-{stamp}.json"
    path.write_text(json.dumps(document, indent=2, default=str))
    print(json.dumps({"result": str(path), "fits": {m: d["fit"] for m, d in minors.items()}}, indent=2), flush=True)
    return 0
