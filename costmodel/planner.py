"""``crdscope mrap``: what a platform needs activated, read from a cluster or from files, and priced.

From a cluster (read-only) a fixed number of requests, whatever the number of kinds: ``/version``,
the MRDs as a Table without objects (names, state, Established; 2,000 rows a page), the MRAPs,
the Compositions, the ProviderRevisions (which MRDs each lists, and whether Crossplane v2.4 keeps
its runtime scaled to zero awaiting activation) and one ``/metrics`` scrape (stored objects per
resource: the kinds in use).  :func:`wakes` says which sleeping provider runtimes the plan wakes.
From files (``--from``): the objects of a directory, a YAML file, a ``.xpkg`` or a package
reference; a Provider package's CRDs are its MRDs, Inactive when it declares ``safe-start`` and no
MRAP among the files matches them, Active otherwise (as Crossplane would create them).

The plan is priced by the cost model of the cluster's minor, through the Crossplane activation path
(what the CRDs cost when Crossplane creates them as an MRAP activates their MRDs, calibrated apart from
a direct install: :data:`.model.ACTIVATION`): the CRDs' own schemas where they were read (files), else
as typical CRDs of the calibration's real provider set (a cluster: MRD schemas are megabytes and are
not read).  MRDs themselves cost memory whether Active or not (about 0.8 MiB each inactive,
``bench/RESULTS.md``): no plan saves that.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

from crdscope.base.activation import (
    MRD, MRD_BYTES, ActivationReport, CompositionKinds, Policy, analyse, policy_of, read_composition,
)
from crdscope.base.crossplane import AWAITING_ACTIVATION, PLAIN_CRD_KINDS, is_safe_start
from crdscope.base.globs import go_match
from crdscope.base.errors import ClusterError, ConfigError

from .attribution import typical_terms
from .coefficients import calibrated_minors, for_minor
from .features import CRDFeatures, features_of_spec
from .model import ACTIVATION, Estimate, Interval, Target, estimate

MIB = float(1 << 20)
#: What an MRD costs the API server, Active or not (measured: :data:`base.activation.MRD_BYTES`).
INACTIVE_MRD_BYTES = MRD_BYTES
XP_GROUP = "apiextensions.crossplane.io"
MRDS_PATH = f"/apis/{XP_GROUP}/v1alpha1/managedresourcedefinitions"
MRAPS_PATH = f"/apis/{XP_GROUP}/v1alpha1/managedresourceactivationpolicies"
REVISIONS_PATH = "/apis/pkg.crossplane.io/v1/providerrevisions"
COMPOSITIONS_PATH = f"/apis/{XP_GROUP}/v1/compositions"
#: Stored objects per resource: the 1.37 name first.
OBJECT_FAMILIES = ("apiserver_resource_objects", "apiserver_storage_objects")
META_GROUP = "meta.pkg.crossplane.io"
_MINOR = re.compile(r"\d+")


@dataclasses.dataclass(frozen=True)
class ProviderRuntime:
    """A provider whose runtime waits for an activation: Crossplane v2.4+ keeps a safe-start provider's
    runtime scaled to zero until one of its MRDs is Active (crossplane#7586, #7639)."""

    provider: str
    #: Its active revision ("" when read from files)
    revision: str
    #: The MRDs its revision lists (its package's CRDs, from files)
    mrds: tuple[str, ...]
    #: Scaled to zero now: its ``RuntimeActive`` says ``AwaitingActivation`` (a cluster), or it is
    #: safe-start with no MRD Active (files: what Crossplane v2.4+ would do)
    awaiting: bool


@dataclasses.dataclass(frozen=True)
class Wake:
    """What the plan does to one sleeping provider runtime."""

    provider: str
    revision: str
    #: Of its MRDs, how many the plan activates (0: it stays scaled to zero), and how many it has
    activates: int
    mrds: int

    @property
    def wakes(self) -> bool:
        return self.activates > 0


@dataclasses.dataclass(frozen=True)
class Platform:
    """A platform's Compositions, MRDs and MRAPs, however read."""

    compositions: tuple[CompositionKinds, ...]
    mrds: tuple[MRD, ...]
    policies: tuple[Policy, ...]
    #: Groups of the XRDs (their kinds are XRs, not managed resources).
    composite_groups: tuple[str, ...]
    objects_known: bool
    #: Where it was read, for people.
    described: str
    #: The cluster's minor (None: from files).
    minor: str | None = None
    #: CRD features of MRDs whose schemas were read (files); the rest are priced as typical CRDs.
    features: Mapping[str, CRDFeatures] = dataclasses.field(default_factory=dict, repr=False)
    #: Provider runtimes an activation decides (safe-start ones; None: not read, or not readable)
    runtimes: tuple[ProviderRuntime, ...] | None = None
    #: Requests sent to the API server (a cluster read), and what could not be read.
    requests: int = 0
    problems: tuple[str, ...] = ()
    read_seconds: float = 0.0


# --------------------------------------------------------------------------- from files


def _capabilities(meta: Mapping[str, Any]) -> tuple[str, ...]:
    found = (meta.get("spec") or {}).get("capabilities") or []
    return tuple(str(c) for c in found if isinstance(c, str))


def platform_from_files(spec: str) -> Platform:
    """The platform SOURCE holds (a directory, a YAML file, a ``.xpkg``, a package reference)."""
    from crdscope.loader.objects import read_objects

    started = time.monotonic()
    found = read_objects(spec)
    safe_start: dict[str, bool] = {}
    kinds_of_package: dict[str, str] = {}
    names_of_package: dict[str, str] = {}
    for obj in found.objects:
        if obj.package and obj.api_version.startswith(META_GROUP + "/"):
            kinds_of_package[obj.package] = obj.kind
            names_of_package[obj.package] = str((obj.body.get("metadata") or {}).get("name") or obj.package)
            safe_start[obj.package] = is_safe_start(_capabilities(obj.body))
    compositions, policies, xrd_groups = [], [], []
    crds: dict[str, tuple[dict[str, Any], str]] = {}
    mrd_states: dict[str, str] = {}
    for obj in found.objects:
        group = obj.api_version.split("/", 1)[0]
        if obj.kind == "Composition" and group == XP_GROUP:
            compositions.append(read_composition(obj.body))
        elif obj.kind == "ManagedResourceActivationPolicy" and group == XP_GROUP:
            policies.append(policy_of(obj.body))
        elif obj.kind == "CompositeResourceDefinition" and group == XP_GROUP:
            xrd_groups.append(str((obj.body.get("spec") or {}).get("group") or ""))
        elif obj.kind in ("CustomResourceDefinition", "ManagedResourceDefinition"):
            name = str((obj.body.get("metadata") or {}).get("name") or "")
            body_spec = obj.body.get("spec") if isinstance(obj.body.get("spec"), dict) else None
            if not name or body_spec is None:
                continue
            provider = kinds_of_package.get(obj.package) == "Provider"
            managed = "managed" in ((body_spec.get("names") or {}).get("categories") or [])
            if obj.kind == "ManagedResourceDefinition":
                mrd_states[name] = str(body_spec.get("state") or "Inactive")
            elif not (provider or (not obj.package and managed)):
                continue  # a Configuration's or another package's CRD, not a managed resource
            elif provider and (body_spec.get("names") or {}).get("kind") in PLAIN_CRD_KINDS:
                continue  # a ProviderConfig kind: Crossplane v2.4 installs it as a CRD, never an MRD
            crds[name] = (body_spec, obj.package)
    patterns = [p for policy in policies for p in policy.patterns]
    mrds, features = [], {}
    for name, (body_spec, package) in sorted(crds.items()):
        if name in mrd_states:
            state = mrd_states[name]
        elif safe_start.get(package, False) or not package:
            state = "Active" if any(go_match(p, name) for p in patterns) else "Inactive"
        else:
            state = "Active"  # no safe-start: Crossplane creates the MRD Active
        kind = str((body_spec.get("names") or {}).get("kind") or "")
        mrds.append(MRD(name, state=state, kind=kind))
        with contextlib.suppress(KeyError, TypeError, ValueError, AttributeError):  # else priced as typical
            features[name] = features_of_spec(name, {k: v for k, v in body_spec.items() if k != "state"})
    if not compositions and not mrds:
        raise ConfigError(f"{spec}: no Composition and no managed resource CRD or MRD found")
    problems = tuple(f"{p.origin}: {p.reason}" for p in found.problems)
    return Platform(tuple(compositions), tuple(mrds), tuple(policies), tuple(g for g in xrd_groups if g),
                    objects_known=False, described=f"files {spec}", features=features, problems=problems,
                    runtimes=_package_runtimes(crds, mrds, safe_start, names_of_package),
                    read_seconds=time.monotonic() - started)


def _package_runtimes(crds: Mapping[str, tuple[dict[str, Any], str]], mrds: Iterable[MRD],
                      safe_start: Mapping[str, bool], names: Mapping[str, str]) -> tuple[ProviderRuntime, ...]:
    """The safe-start Provider packages among the files: each one's runtime waits for an activation on
    Crossplane v2.4+ while none of its MRDs is Active."""
    active = {m.name for m in mrds if m.active}
    by_package: dict[str, list[str]] = {}
    for name, (_, package) in crds.items():
        if package and safe_start.get(package):
            by_package.setdefault(package, []).append(name)
    return tuple(ProviderRuntime(names.get(package, package), "", tuple(sorted(owned)),
                                 awaiting=not active.intersection(owned))
                 for package, owned in sorted(by_package.items()))


# --------------------------------------------------------------------------- from a cluster


def _objects(content: bytes) -> dict[str, int] | None:
    from crdscope.connection.metrics import parse_text

    scrape = parse_text(content, OBJECT_FAMILIES)
    for family in OBJECT_FAMILIES:
        grouped = scrape.by(family, "group", "resource")
        if grouped:
            return {f"{resource}.{group}" if group else resource: int(value)
                    for (group, resource), value in grouped.items() if value >= 0}
    return None


async def read_platform(context: str | None, kubeconfig: str | None = None) -> Platform:
    """The platform on a cluster: a fixed number of read-only requests, none per kind."""
    # The connection stack only here: a platform read from files (`mrap --from`) needs none of it.
    from crdscope.connection.cluster import Cluster, explain, raise_for_status
    from crdscope.connection.crossplane_read import TABLE_ACCEPT, TABLE_PAGE, list_all, parse_mrd_table
    from crdscope.connection.kubeconfig import load_config
    from crdscope.connection.transport import TRANSPORT_ERRORS

    config = load_config(kubeconfig, context)
    started = time.monotonic()
    problems: list[str] = []
    async with Cluster(config) as cluster:
        try:
            version_answer = await cluster.client.get("/version")
            raise_for_status(version_answer)
            version = version_answer.json()
            mrd_answer, mrap_answer, composition_answer, revision_answer, metrics = await asyncio.gather(
                list_all(cluster, MRDS_PATH, accept=TABLE_ACCEPT, limit=TABLE_PAGE),
                list_all(cluster, MRAPS_PATH), list_all(cluster, COMPOSITIONS_PATH),
                list_all(cluster, REVISIONS_PATH), cluster.client.get("/metrics"))
        except TRANSPORT_ERRORS as exc:
            raise ClusterError(explain(exc, cluster.server)) from None
        except ValueError:
            raise ClusterError(f"{cluster.server} did not answer JSON") from None
        requests = cluster.requests.requests
    if isinstance(mrd_answer, str):
        if " 404" in mrd_answer or "answered 404" in mrd_answer:
            raise ConfigError(f"{config.server} has no ManagedResourceDefinitions: is Crossplane v2 installed?")
        raise ClusterError(f"cannot read the MRDs: {mrd_answer}")
    objects = _objects(metrics.content) if metrics.status_code == 200 else None
    if objects is None:
        problems.append(f"/metrics answered {metrics.status_code}: object counts unknown, so \"unused\" means "
                        "\"not composed\"" if metrics.status_code != 200 else
                        "/metrics has no stored-object counts: \"unused\" means \"not composed\"")
    rows = parse_mrd_table({"columnDefinitions": mrd_answer[1], "rows": mrd_answer[0]})
    mrds = tuple(MRD(row.name, state=row.state or "Inactive",
                     established=row.established if row.state == "Active" else None,
                     objects=(objects.get(row.name, 0) if objects is not None else None)) for row in rows)
    policies: tuple[Policy, ...] = ()
    if isinstance(mrap_answer, str):
        problems.append(f"MRAPs not read: {mrap_answer}")
    else:
        policies = tuple(policy_of(item) for item in mrap_answer[0] if isinstance(item, dict))
    compositions: tuple[CompositionKinds, ...] = ()
    if isinstance(composition_answer, str):
        problems.append(f"Compositions not read: {composition_answer}")
    else:
        compositions = tuple(read_composition(item) for item in composition_answer[0] if isinstance(item, dict))
    runtimes = None
    if isinstance(revision_answer, str):
        problems.append(f"ProviderRevisions not read (which provider runtimes an activation wakes): {revision_answer}")
    else:
        runtimes = _revision_runtimes(revision_answer[0])
    minor_digits = _MINOR.search(str(version.get("minor", "")))
    minor = f"{version.get('major', '1')}.{minor_digits.group(0) if minor_digits else '0'}"
    return Platform(compositions, mrds, policies, (), objects_known=objects is not None,
                    described=f"context {context or '(current)'} at {config.server}", minor=minor,
                    runtimes=runtimes, requests=requests, problems=tuple(problems),
                    read_seconds=time.monotonic() - started)


def _revision_runtimes(items: Iterable[Any]) -> tuple[ProviderRuntime, ...]:
    """The active safe-start revisions, each with whether its ``RuntimeActive`` says it awaits activation."""
    from crdscope.connection.crossplane_read import parse_revision

    found = []
    for item in items:
        if not isinstance(item, dict):
            continue
        revision = parse_revision(item)
        info = revision.info
        if info.desired_state != "Active" or not info.safe_start:
            continue
        awaiting = info.runtime_active == "False" and info.runtime_active_reason == AWAITING_ACTIVATION
        found.append(ProviderRuntime(revision.provider or info.name, info.name, revision.mrd_names, awaiting))
    return tuple(sorted(found, key=lambda r: r.provider))


def wakes(report: ActivationReport, platform: Platform) -> list[Wake]:
    """For each provider runtime scaled to zero awaiting activation: how many of its MRDs the plan
    activates (any: Crossplane scales it up, a provider pod starts)."""
    planned = {n.mrd for n in report.needed}
    return [Wake(r.provider, r.revision, len(planned.intersection(r.mrds)), len(r.mrds))
            for r in platform.runtimes or () if r.awaiting]


def report_of(platform: Platform, plan_name: str | None = None) -> ActivationReport:
    """Needed kinds, verdicts and the plan for ``platform``."""
    extra = {"plan_name": plan_name} if plan_name else {}
    return analyse(platform.compositions, platform.mrds, platform.policies, objects_known=platform.objects_known,
                   composite_groups=platform.composite_groups, **extra)


# --------------------------------------------------------------------------- what it costs


@dataclasses.dataclass(frozen=True)
class PlanCost:
    """The plan against today's active set and against activating everything, by the cost model."""

    minor: str
    model_minor: str
    note: str
    #: "schemas" (each CRD's own) or "typical" (the calibration's typical CRD).
    priced_by: str
    plan_crds: int
    active_crds: int
    all_crds: int
    #: Memory of the CRDs of each set (the fixed server cost not included).
    plan_bytes: Interval
    active_bytes: Interval
    all_bytes: Interval
    #: What the plan leaves out of "activate everything", and of today's active set (a reinstall).
    saving_vs_all_bytes: Interval
    saving_vs_active_bytes: Interval
    #: What applying the plan now adds (its kinds not active yet), and how long their install takes.
    adds_crds: int
    adds_bytes: Interval
    adds_seconds: Interval
    plan_install_seconds: Interval
    all_install_seconds: Interval
    #: The MRDs stay whatever is activated: what they hold, at :data:`INACTIVE_MRD_BYTES` each.
    mrd_bytes: float
    #: The path priced (:data:`.model.ACTIVATION`; :data:`.model.DIRECT` while the activation path is not
    #: calibrated), said plainly in ``path_note``: its calibration and minor.
    path: str = ""
    path_note: str = ""


def typical_crd(name: str, minor: str) -> CRDFeatures:
    """An MRD whose schema was not read, as a typical CRD of the calibration's provider set."""
    terms = typical_terms(minor)
    plural, _, group = name.partition(".")
    served = max(1, round(terms["served_versions"]))
    return CRDFeatures(name=name, group=group, kind=plural, plural=plural, singular=plural, namespaced=".m." in
                       f".{group}.", served_versions=tuple(f"v{i + 1}" for i in range(served)),
                       storage_version="v1", schema_bytes=int(terms["schema_bytes"]), schema_properties=0,
                       printer_columns=0, subresources=("status",), conversion="None")


def price(report: ActivationReport, platform: Platform, minor: str | None = None) -> PlanCost:
    """What the plan costs and saves on ``minor`` (default: the cluster's, else the newest calibrated)."""
    chosen = minor or platform.minor or calibrated_minors()[-1]
    coefficients = for_minor(chosen)

    def features(names: Iterable[str]) -> list[CRDFeatures]:
        return [platform.features.get(n) or typical_crd(n, coefficients.minor) for n in sorted(names)]

    every = {m.name for m in platform.mrds}
    active = {m.name for m in platform.mrds if m.active}
    planned = {n.mrd for n in report.needed}

    def activated(names: set[str], crds: int = 1) -> Estimate:
        """The CRDs of ``names`` created by Crossplane on a cluster holding ``crds`` CRDs (at least its own)."""
        return estimate(features(names), coefficients.minor, target=Target(crds=max(1, crds)), path=ACTIVATION)

    def memory(names: set[str]) -> Interval:
        """What the CRDs of ``names`` hold themselves (not the one-time cost of a server's first CRDs)."""
        return activated(names).memory_bytes if names else Interval(0.0, 0.0, 0.0)

    def seconds(names: set[str]) -> Interval:
        """From an MRAP's apply to every CRD of ``names`` Established."""
        return activated(names).install_seconds if names else Interval(0.0, 0.0, 0.0)

    adds = planned - active
    adds_estimate = activated(adds, len(active))
    priced_by = "schemas" if every and all(n in platform.features for n in every) else "typical"
    return PlanCost(
        minor=chosen, model_minor=coefficients.minor, note=coefficients.note, priced_by=priced_by,
        plan_crds=len(planned), active_crds=len(active), all_crds=len(every),
        plan_bytes=memory(planned), active_bytes=memory(active), all_bytes=memory(every),
        saving_vs_all_bytes=memory(every - planned), saving_vs_active_bytes=memory(active - planned),
        adds_crds=len(adds), adds_bytes=adds_estimate.memory_bytes if adds else Interval(0.0, 0.0, 0.0),
        adds_seconds=adds_estimate.install_seconds if adds else Interval(0.0, 0.0, 0.0),
        plan_install_seconds=seconds(planned), all_install_seconds=seconds(every),
        mrd_bytes=len(every) * INACTIVE_MRD_BYTES, path=adds_estimate.path, path_note=adds_estimate.path_note)
