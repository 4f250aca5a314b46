"""What a command is about to build from Go modules, and about how long: said before the first build.

A first ``make demo`` spends most of its time in Go builds; a person should know before they start.
The times are those measured on this project's 2-core machine (each build's ``build.json`` in the
cache): kube-apiserver and etcd of the newest minor from cold 831 s, another minor's kube-apiserver
550-925 s (1.33, 1.26; more beside other work), Crossplane's CLI, crane and the v2.0 core (the CLI's
module, 155 Go modules) 589 s, the v2.4.2 core after it 303 s, kube-controller-manager after
kube-apiserver of its minor 210 s.  On another machine they are scaled by its cores as Amdahl's law
does: the compile (four fifths of a cold build here) runs a package per core, while downloading the
modules and linking do not go faster with more cores.  It is an estimate and says so: a busy machine
or a slow module proxy takes longer.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: The cores the build times were measured on.
MEASURED_CORES = 2
#: The share of a build that more cores do not shorten (module downloads, linking).
SERIAL_SHARE = 0.2
#: Minutes on :data:`MEASURED_CORES` cores, low and high (the high end: beside other work).
KUBE_APISERVER_MINUTES = (8.0, 15.0)
CROSSPLANE_CLI_MINUTES = (5.0, 10.0)
CROSSPLANE_CORE_MINUTES = (3.0, 6.0)
CONTROLLER_MANAGER_MINUTES = (2.0, 4.0)


@dataclass(frozen=True)
class PlannedBuild:
    """One build still to do: what it makes and its minutes on :data:`MEASURED_CORES` cores."""

    what: str
    minutes: tuple[float, float]


def planned_builds(kubernetes: Sequence[str | None] = (None,), *, crossplane: bool = False,
                   crossplane_version: str | None = None, controllers: bool = False,
                   controllers_for: str | None = None) -> list[PlannedBuild]:
    """The builds missing from the cache for the ``kubernetes`` minors (None: the newest), Crossplane
    (``crossplane_version``, default the lab's) and, with ``controllers``, kube-controller-manager of the
    minor ``controllers_for`` (None: the newest), in the order they would run."""
    from crdscope.toolchain import crossplane as toolchain_crossplane

    from .binaries import build_dir, cached_binaries, pinned_versions, versions_for

    planned: list[PlannedBuild] = []
    if crossplane:
        for release in toolchain_crossplane.releases_to_build(crossplane_version):
            cli = release == toolchain_crossplane.CLI_RELEASE
            planned.append(PlannedBuild(
                f"Crossplane {release.version}'s {'CLI, crane and core' if cli else 'core'}",
                CROSSPLANE_CLI_MINUTES if cli else CROSSPLANE_CORE_MINUTES))
        if controllers:
            versions = versions_for(controllers_for)
            if not (build_dir(versions) / "kube-controller-manager").is_file():
                planned.append(PlannedBuild(f"kube-controller-manager {versions.kubernetes}",
                                            CONTROLLER_MANAGER_MINUTES))
    etcd_built = cached_binaries(pinned_versions()) is not None
    for minor in dict.fromkeys(versions_for(m).kubernetes for m in kubernetes):
        versions = versions_for(minor)
        if cached_binaries(versions) is not None:
            continue
        etcd = "" if etcd_built else f" and etcd {versions.etcd}"
        etcd_built = True
        planned.append(PlannedBuild(f"kube-apiserver {versions.kubernetes}{etcd}", KUBE_APISERVER_MINUTES))
    return planned


def scaled_minutes(minutes: float, cores: int) -> float:
    """``minutes`` measured on :data:`MEASURED_CORES` cores, on ``cores`` cores."""
    cores = max(1, cores)
    return minutes * (SERIAL_SHARE + (1 - SERIAL_SHARE) * MEASURED_CORES / cores)


def machine_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def plan_line(planned: Sequence[PlannedBuild], cores: int | None = None) -> str:
    """One line before the first build: each build and its minutes, the whole, and that it is an estimate
    (empty when nothing is to be built)."""
    if not planned:
        return ""
    cores = cores or machine_cores()

    def span(low: float, high: float) -> str:
        first, last = (max(1, round(scaled_minutes(m, cores))) for m in (low, high))
        return f"{first}-{max(last, first + 1)} min"

    each = ", ".join(f"{p.what} (about {span(*p.minutes)})" for p in planned)
    low, high = (sum(p.minutes[i] for p in planned) for i in (0, 1))
    where = f"{cores} core{'s' if cores != 1 else ''}"
    return (f"to build from Go modules first: {each}; about {span(low, high)} in all on this machine's {where} "
            f"(an estimate from the builds measured on {MEASURED_CORES} cores; longer while the machine is busy), "
            "once: then cached")


def say_plan(say: Callable[[str], None], kubernetes: Sequence[str | None] = (None,), *, crossplane: bool = False,
             crossplane_version: str | None = None, controllers_for: str | None = None) -> None:
    """Say :func:`plan_line` of what :func:`planned_builds` finds missing (with ``crossplane``, its
    kube-controller-manager too), when there is any and Go is there to build it (without Go the build's
    own error says so)."""
    if not shutil.which("go"):
        return
    line = plan_line(planned_builds(kubernetes, crossplane=crossplane, crossplane_version=crossplane_version,
                                    controllers=crossplane, controllers_for=controllers_for))
    if line:
        say(line)
