"""The etcd-connections finding: an API server holding more etcd connections than its minor's design explains.

What the design is, measured on the lab for every figure below (``python -m bench etcd_connections``,
``bench/results/etcd-connections-*.json``; the table in bench/RESULTS.md): the API server opens one
etcd client, one TCP connection, per storage.  Its built-in resources' storages open at start (the
*baseline*, different per minor); a CRD installed opens none; a custom resource kind opens one per
version it serves at its first request (a LIST, a create, a watch) and keeps them until its CRD
changes or goes.  Every minor measured, 1.26 to 1.38.0-beta.0, does exactly this: none shares clients
between storages, none leaked one under spec updates, re-creations, an etcd restart or deletions.
The published 1,937 connections for 1,878 CRDs are this design with every kind in use (a provider's
controllers watch each of its kinds), not an older release's.

So the expected count lies between the baseline plus the kinds that hold objects (each in use, one
version at least) and the baseline plus every version every CRD serves (every kind in use).  Only a
count above that upper end, with room for what the baseline varies by, is a finding: each storage's
client connecting to several etcd endpoints, or storages not torn down.  Upgrading is advised only
where a newer minor's design holds fewer connections for the same kinds in use (none measured does).
"""

from __future__ import annotations

import dataclasses
import math

from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.inventory import InventorySample
from crdscope.base.samples.version import VersionSample

from .model import Finding, Severity
from .observations import Observations, kubernetes_minor
from .spec import CheckSpec

#: The count judged is the lowest of the health samples of the last this many seconds: a CRD update
#: replaces its kind's storages and tears the old ones down a moment later (measured: about 1 s).
ETCD_HOLD_SECONDS = 30.0
#: Room above the expected upper end: a fraction of it, and at least this many connections (a
#: cluster's enabled APIs and aggregated servers move the baseline; the lab's moved by 1 run to run).
ETCD_SLACK_FRACTION = 0.25
ETCD_SLACK_MIN = 20
#: The measurements the model comes from (bench/results/).
MEASUREMENTS = "bench/results/etcd-connections-20261207T213204Z.json"


@dataclasses.dataclass(frozen=True)
class EtcdDesign:
    """What one minor's API server holds, as measured on the lab."""

    minor: str
    #: Connections with CRDs installed and no custom resource kind in use.
    baseline: int
    #: Connections a CRD installed adds before its kind is used, and each served version of a kind in use.
    per_crd_installed: float
    per_version_in_use: float
    #: The build and the run the figures come from.
    measured_on: str
    #: False: only the baseline was measured on this minor; the rest is what every minor around it measured.
    whole: bool = True


def _design(minor: str, baseline: int, build: str, whole: bool = True) -> EtcdDesign:
    how = build if whole else f"{build} by python -m bench versions, 2,065 CRDs installed"
    return EtcdDesign(minor, baseline, 0.0, 1.0, how, whole)


#: This bench's minors whole; the others' baselines from `python -m bench versions` (bench/RESULTS.md,
#: "Every minor, 1.26-1.37": 0.0 per CRD installed there too), per version what the minors around them hold.
DESIGNS: dict[str, EtcdDesign] = {design.minor: design for design in (
    _design("1.26", 60, "v1.26.15"),
    _design("1.27", 56, "v1.27.16", whole=False),
    _design("1.28", 56, "v1.28.15"),
    _design("1.29", 56, "v1.29.15", whole=False),
    _design("1.30", 58, "v1.30.14", whole=False),
    _design("1.31", 58, "v1.31.14", whole=False),
    _design("1.32", 56, "v1.32.13", whole=False),
    _design("1.33", 58, "v1.33.13"),
    _design("1.34", 61, "v1.34.12", whole=False),
    _design("1.35", 61, "v1.35.8", whole=False),
    _design("1.36", 64, "v1.36.5", whole=False),
    _design("1.37", 69, "v1.37.2"),
    _design("1.38", 69, "v1.38.0-beta.0"),
)}


def _number(minor: str) -> int:
    """``1.37`` -> 37 (0 for what is not a minor)."""
    _, _, number = minor.partition(".")
    return int(number) if number.isdigit() else 0


def design_for(minor: str) -> tuple[EtcdDesign, str]:
    """The design of ``minor``, else the nearest measured one's (the newer of two); and a note saying so."""
    if minor in DESIGNS:
        return DESIGNS[minor], ""
    wanted = _number(minor)
    nearest = min(DESIGNS.values(), key=lambda d: (abs(_number(d.minor) - wanted), -_number(d.minor)))
    return nearest, f"{minor} not measured: {nearest.minor}'s design"


def newer_design_with_fewer(design: EtcdDesign) -> EtcdDesign | None:
    """The oldest newer minor whose design holds fewer connections per served version in use."""
    newer = [d for d in DESIGNS.values()
             if _number(d.minor) > _number(design.minor) and d.per_version_in_use < design.per_version_in_use]
    return min(newer, key=lambda d: _number(d.minor)) if newer else None


@dataclasses.dataclass(frozen=True)
class Expected:
    """The connections a server's design explains, for what is installed and in use."""

    design: EtcdDesign
    #: Kinds holding objects (in use for sure) and versions served by every CRD (all in use at most).
    kinds_with_objects: int
    served_versions: int
    crds: int

    @property
    def low(self) -> int:
        return math.floor(self.design.baseline + self.design.per_crd_installed * self.crds
                          + self.design.per_version_in_use * self.kinds_with_objects)

    @property
    def high(self) -> int:
        return math.ceil(self.design.baseline + self.design.per_crd_installed * self.crds
                         + self.design.per_version_in_use * self.served_versions)

    @property
    def allowed(self) -> int:
        """The most connections judged normal: the upper end and its room."""
        return self.high + max(ETCD_SLACK_MIN, math.ceil(ETCD_SLACK_FRACTION * self.high))


def expected_of(obs: Observations, health: HealthSample) -> tuple[Expected, str] | None:
    """What the server's minor explains for the CRDs now (None: the versions served are not counted)."""
    inventory = obs.good(InventorySample)
    if inventory is None or inventory.served_versions is None:
        return None
    design, note = design_for(kubernetes_minor(obs))
    if obs.good(VersionSample) is None:
        note = f"server version unknown: {design.minor}'s design"
    crds = health.crds if health.crds is not None else inventory.crds
    with_objects = crds - health.crds_without_objects if health.crds_without_objects is not None else 0
    return Expected(design, max(0, with_objects), inventory.served_versions, crds), note


def held_connections(obs: Observations) -> int | None:
    """The lowest count of the good health samples of the last :data:`ETCD_HOLD_SECONDS` (None: none counted)."""
    newest = obs.newest_health_with("etcd_connections")
    if newest is None or newest.etcd_connections is None:
        return None
    counts = [s.etcd_connections for s in obs.health_history()
              if s.etcd_connections is not None and s.timestamp >= newest.timestamp - ETCD_HOLD_SECONDS]
    return min(counts, default=newest.etcd_connections)


def etcd_connections(obs: Observations) -> list[Finding]:
    """More etcd connections than the server's minor opens for the CRDs installed and in use."""
    health = obs.newest_health_with("etcd_connections")
    held = held_connections(obs)
    if health is None or held is None:
        return []
    judged = expected_of(obs, health)
    if judged is None:
        return []
    expected, note = judged
    if held <= expected.allowed:
        return []
    return [Finding(
        "etcd-connections-per-crd", Severity.WARNING,
        f"API server holds {held} etcd connections, over the {expected.high} its "
        f"{expected.design.minor} design explains for {expected.crds} CRDs",
        _evidence(held, expected, note), _CAUSE, _remedy(expected.design))]


def _evidence(held: int, expected: Expected, note: str) -> tuple[str, ...]:
    design = expected.design
    return (
        f"health.etcd_connections = {held} (established TCP connections to etcd, from /proc; the lowest of "
        f"the last {ETCD_HOLD_SECONDS:g} s)",
        f"expected {expected.low} to {expected.high}: {design.minor}'s baseline {design.baseline} (measured on "
        f"{design.measured_on}, no custom resource kind in use){f'; {note}' if note else ''}, "
        f"{design.per_crd_installed:g} per CRD installed, {design.per_version_in_use:g} per served version of "
        f"each kind in use{'' if design.whole else ' (as on every minor measured whole)'}: at least the "
        f"{expected.kinds_with_objects} kinds holding objects (health.crds - "
        f"health.crds_without_objects), at most the {expected.served_versions} versions the {expected.crds} "
        "CRDs serve (inventory.served_versions: every kind in use)",
        f"judged normal up to {expected.allowed} (+{ETCD_SLACK_FRACTION:.0%} of {expected.high}, at least "
        f"{ETCD_SLACK_MIN}: enabled APIs and aggregated servers move the baseline); the model: "
        f"python -m bench etcd_connections ({MEASUREMENTS})",
    )


_CAUSE = ("every storage (each built-in resource, each served version of a custom resource kind in use) "
          "holds one etcd client with a connection to each etcd endpoint the API server is given: more than "
          "that means the clients connect to several endpoints for one member (--etcd-servers names a "
          "member twice, or through a proxy and directly), or storages were not torn down (a leak)")


def _remedy(design: EtcdDesign) -> str:
    newer = newer_design_with_fewer(design)
    upgrade = (f"{newer.minor} holds {newer.per_version_in_use:g} per served version in use against "
               f"{design.per_version_in_use:g} here: upgrading lowers it" if newer is not None else
               f"no newer minor measured holds fewer per kind in use than {design.minor}: an upgrade would not "
               "lower it")
    return ("compare the API server's --etcd-servers with etcd's members (each listed once); a restart of "
            f"the API server releases leaked connections; {upgrade}")


ETCD_CONNECTIONS_CHECK = CheckSpec(
    etcd_connections, "etcd connections against the minor's design (lab)", probes=(HealthSample, InventorySample),
    also_reads=(VersionSample,), constants=("ETCD_HOLD_SECONDS", "ETCD_SLACK_FRACTION", "ETCD_SLACK_MIN"),
    kinds=("etcd-connections-per-crd",))
