"""Real Crossplane v2 provider packages (``.xpkg``) of any loader source, built by the real ``crank``.

Roots (``crossplane.yaml`` + ``crds/``) are written from SOURCE as ``crdscope load`` reads it, then
``crank xpkg build`` runs on each and ``--push`` runs ``crank xpkg push`` to
``REGISTRY/crdscope/<package>:<version>``.  Families (``--family``) split as Upbound's do
(``crank xpkg batch``: a service package takes the CRD files named ``<service>.*``, the config
package the provider's own group's): a group that is the domain of another group of the source
(``aws.upbound.io`` under ``s3.aws.upbound.io``; ``aws.m.upbound.io`` likewise) goes to the
family package, every other group to the package of its first label (``s3.aws.upbound.io`` and
its namespaced twin ``s3.aws.m.upbound.io``: ``NAME-s3``).  The family package is
``provider-family-X`` for NAME ``provider-X`` (upstream's name), else ``NAME-family``; members
declare ``spec.dependsOn`` on it, and all carry ``pkg.crossplane.io/provider-family`` (by which
Crossplane lets a family's members use each other's types).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from crdscope.connection.crd_marks import MANAGED_BY_LABEL
from crdscope.base.errors import ConfigError, CrdscopeError

from .documents import CRD_API_VERSION, CRD_KIND, CRDDocument, Item, Source, SourceProblem, UniqueNames
from .registry_auth import RegistryConfig, is_loopback, redact, refusal, registry_config

META_API_VERSION = "meta.pkg.crossplane.io/v1"
#: The registry the demo's packages name: never resolvable (RFC 2606), rewritten on pull by the
#: ImageConfig of :func:`loader.crossplane_install.image_config`.
PACKAGE_HOST = "xpkg.crdscope.invalid"

#: Crossplane's ``pkgmetav1.ProviderCapabilitySafeStart`` (apis/pkg/meta/v1/capabilities.go): its MRDs
#: start Inactive, so no CRD is created until an activation policy names it.
SAFE_START = "safe-start"
#: ``pkgv1.LabelProviderFamily``: revisions of one family see each other's types.
FAMILY_LABEL = "pkg.crossplane.io/provider-family"
#: The repository path under the registry: ``HOST:PORT/crdscope/<package>:<version>``.
ORGANISATION = "crdscope"
DEFAULT_VERSION = "v0.1.0"
#: Named in a family's dependencies when no registry is given and no lab has one.
FALLBACK_REGISTRY = "localhost:5000"
CRANK_ENV = "CRDSCOPE_CRANK"
CRANK_TIMEOUT_SECONDS = 900.0

_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
# An OCI tag Crossplane reads as a semantic version (no "+": tags cannot hold it).
_VERSION = re.compile(r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$")
_REGISTRY = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)(:(\d{1,5}))?$")


class PackageError(CrdscopeError):
    """crank failed to build or push a package."""


# --------------------------------------------------------------------------- what goes where


@dataclass(frozen=True)
class PackagePlan:
    """One package to build: its name, its CRDs (names) and their groups, its family role."""

    name: str
    crds: tuple[str, ...]
    groups: tuple[str, ...]
    #: the family package's name (on every package of a family, itself included)
    family: str | None = None
    #: the package this one depends on (members of a family: the family package)
    depends_on: str | None = None


def family_package_name(name: str) -> str:
    """``provider-aws`` -> ``provider-family-aws`` (as upstream names it); any other NAME -> ``NAME-family``."""
    return f"provider-family-{name[len('provider-'):]}" if name.startswith("provider-") else f"{name}-family"


def provider_groups(groups: Iterable[str]) -> set[str]:
    """The groups that are the domain of another group of the source: the provider's own config groups."""
    unique = set(groups)
    return {group for group in unique if any(other.endswith("." + group) for other in unique)}


def plan_packages(crds: dict[str, str], name: str, *, family: bool = False) -> list[PackagePlan]:
    """The packages for ``crds`` (CRD name -> group): one (monolithic), or a family (see the module doc).

    A family's package comes first (it may hold no CRD: it is what members depend on), then its
    members by name; CRDs and groups are sorted, so the same source always makes the same packages.
    """
    if not family:
        return [PackagePlan(name, tuple(sorted(crds)), tuple(sorted(set(crds.values()))))]
    own = provider_groups(crds.values())
    anchor = family_package_name(name)
    members: dict[str, list[str]] = {}
    for crd, group in crds.items():
        package = anchor if group in own else f"{name}-{group.split('.')[0]}"
        if package == anchor and group not in own:
            raise ConfigError(f"group {group} would make a package named {anchor} like the family's; "
                              "choose another --name")
        members.setdefault(package, []).append(crd)
    plans = [PackagePlan(anchor, tuple(sorted(members.pop(anchor, []))),
                         tuple(sorted(g for g in set(crds.values()) if g in own)), family=anchor)]
    for package in sorted(members):
        names = tuple(sorted(members[package]))
        plans.append(PackagePlan(package, names, tuple(sorted({crds[n] for n in names})), family=anchor,
                                 depends_on=anchor))
    return plans


def package_metadata(plan: PackagePlan, *, safe_start: bool, version: str, registry: str | None) -> dict[str, Any]:
    """``crossplane.yaml``: a ``meta.pkg.crossplane.io/v1`` Provider (v2's names no controller image:
    the package image is the runtime)."""
    metadata: dict[str, Any] = {"name": plan.name}
    if plan.family:
        metadata["labels"] = {FAMILY_LABEL: plan.family}
    spec: dict[str, Any] = {}
    if safe_start:
        spec["capabilities"] = [SAFE_START]
    if plan.depends_on:
        spec["dependsOn"] = [{"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider",
                              "package": repository(registry or FALLBACK_REGISTRY, plan.depends_on),
                              "version": version}]
    return {"apiVersion": META_API_VERSION, "kind": "Provider", "metadata": metadata, "spec": spec}


def repository(registry: str, package: str) -> str:
    """``HOST:PORT/crdscope/<package>`` (fully qualified: Crossplane v2 has no default registry)."""
    return f"{registry}/{ORGANISATION}/{package}"


# --------------------------------------------------------------------------- checking what was asked


def check_flags(name: str, version: str, registry: str | None) -> None:
    """NAME a package/repository name, the tag a semantic version (crank push and Crossplane's
    resolver need one), the registry ``HOST[:PORT]``: a :class:`ConfigError` otherwise."""
    if not _NAME.match(name or ""):
        raise ConfigError(f"--name {name!r}: a package name is lowercase letters, digits and dashes "
                          "(at most 63, starting and ending with a letter or digit)")
    if not _VERSION.match(version or ""):
        raise ConfigError(f"--version {version!r}: a package tag is a semantic version such as v0.1.0")
    if registry is not None and not _REGISTRY.match(registry):
        raise ConfigError(f"--registry {registry!r}: give HOST:PORT (no scheme, no path), e.g. 127.0.0.1:5000")


def registry_reachable(registry: str, timeout: float = 5.0) -> None:
    """A TCP connection to the registry, before anything is read or built (exit code 3 when none)."""
    match = _REGISTRY.match(registry)
    assert match is not None  # checked by check_flags (the lab's is 127.0.0.1:PORT)
    host, port = match.group(1).strip("[]"), int(match.group(4) or 443)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise CrdscopeError(f"registry {registry} is not reachable: {reason.lower()}", exit_code=3) from None


# --------------------------------------------------------------------------- reading the source


@dataclass
class StagedCRDs:
    """The source's CRDs (written one file each) and what was left out."""

    #: CRD name -> group
    groups: dict[str, str] = field(default_factory=dict)
    not_crds: int = 0
    skipped: list[SourceProblem] = field(default_factory=list)


def crd_file_text(item: CRDDocument) -> bytes:
    """One CRD as a file of the package (JSON, which is YAML: the spec is written as read, unparsed).

    crdscope's own label is dropped: a package's CRDs belong to Crossplane, never to ``crdscope clean``.
    """
    metadata: dict[str, Any] = {"name": item.name}
    labels = {k: v for k, v in (item.metadata.get("labels") or {}).items() if k != MANAGED_BY_LABEL}
    if labels:
        metadata["labels"] = labels
    if item.metadata.get("annotations"):
        metadata["annotations"] = item.metadata["annotations"]
    head = json.dumps({"apiVersion": CRD_API_VERSION, "kind": CRD_KIND, "metadata": metadata})[:-1]
    return b"".join((head.encode(), b', "spec": ', item.spec_json, b"}\n"))


def _items(source: Source) -> Iterator[Item]:
    if type(source).items is Source.items:  # only an async form (another cluster's CRDs)
        async def collect() -> list[Item]:
            return [item async for item in source.aitems()]

        yield from asyncio.run(collect())
        return
    yield from source.items()


def stage_crds(source: Source, directory: Path) -> StagedCRDs:
    """Write every CRD of ``source`` into ``directory``, one file each, streamed (nothing held parsed).

    An unreadable document fails the build (a package missing CRDs would mislead); a repeated name
    keeps its first CRD; documents of other kinds are counted."""
    source.prepare()
    staged = StagedCRDs()
    unique = UniqueNames()
    failures: list[SourceProblem] = []
    for raw in _items(source):
        item = unique.check(raw)
        if isinstance(item, CRDDocument):
            (directory / f"{item.name}.yaml").write_bytes(crd_file_text(item))
            staged.groups[item.name] = item.group
        elif item.outcome == "not-crd":
            staged.not_crds += 1
        elif item.outcome == "skipped":
            staged.skipped.append(item)
        else:
            failures.append(item)
    if failures:
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        raise ConfigError(f"{failures[0].origin}: {failures[0].reason}{more}")
    if not staged.groups:
        raise ConfigError(f"{source.spec}: no CustomResourceDefinitions in it")
    return staged


# --------------------------------------------------------------------------- crank


def crank_binary(say: Callable[[str], None]) -> Path:
    """The real Crossplane CLI: ``$CRDSCOPE_CRANK`` when set, else the lab's build (built once, cached)."""
    override = os.environ.get(CRANK_ENV)
    if override:
        path = Path(override)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ConfigError(f"{CRANK_ENV}={override}: not an executable file")
        return path
    from crdscope.toolchain.crossplane import crossplane_binaries

    return crossplane_binaries(progress=say).crank


def run_crank(crank: Path, arguments: list[str], what: str, cwd: Path | None = None, *,
              registry: str | None = None, config: RegistryConfig | None = None) -> None:
    """Run crank; a failure is one line: what was being done and crank's own last words (cleaned of
    credentials).  ``registry``: the one a push talks to, whose refusal (401, 403) is said as
    :func:`registry_auth.refusal` says it; ``config``: the ``config.json`` crank reads (default:
    the process's, :func:`registry_auth.registry_config`)."""
    chosen = config or registry_config()
    try:
        done = subprocess.run([str(crank), *arguments], cwd=cwd, capture_output=True, text=True,
                              timeout=CRANK_TIMEOUT_SECONDS, check=False, env=chosen.environment())
    except subprocess.TimeoutExpired:
        raise PackageError(f"{what}: crank did not finish in {CRANK_TIMEOUT_SECONDS:.0f}s") from None
    except OSError as exc:
        raise PackageError(f"{what}: cannot run {crank}: {exc.strerror or exc}") from None
    if done.returncode != 0:
        lines = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        said = redact(lines[-1] if lines else f"exit code {done.returncode}", chosen)
        if registry is not None:
            refused = refusal(what, registry, said, loopback=is_loopback(registry), pushing=True, config=chosen)
            if refused is not None:
                raise refused
        raise PackageError(f"{what}: {said.removeprefix('crossplane: error: ')}")


# --------------------------------------------------------------------------- the whole run


@dataclass(frozen=True)
class BuiltPackage:
    """A package file written by crank (and where it was pushed)."""

    plan: PackagePlan
    file: Path
    metadata: dict[str, Any]
    reference: str | None = None

    @property
    def safe_start(self) -> bool:
        """Whether its metadata declares the safe-start capability."""
        return SAFE_START in self.metadata["spec"].get("capabilities", [])

    def to_json(self) -> dict[str, Any]:
        """The package's entry in ``crdscope package --json``."""
        dependency = (self.metadata["spec"].get("dependsOn") or [None])[0]
        return {"name": self.plan.name, "file": str(self.file), "crds": len(self.plan.crds),
                "groups": list(self.plan.groups), "safe_start": self.safe_start, "reference": self.reference,
                "depends_on": f"{dependency['package']}:{dependency['version']}" if dependency else None}


@dataclass(frozen=True)
class PackageRun:
    """What ``crdscope package`` did."""

    source: str
    version: str
    registry: str | None
    pushed: bool
    packages: list[BuiltPackage]
    not_crds: int = 0
    skipped: int = 0

    def to_json(self) -> dict[str, Any]:
        """``crdscope package --json``: one object (see the README, "Crossplane packages")."""
        return {"source": self.source, "version": self.version, "registry": self.registry, "pushed": self.pushed,
                "crds": sum(len(p.plan.crds) for p in self.packages), "not_crds": self.not_crds,
                "skipped": self.skipped, "packages": [p.to_json() for p in self.packages]}


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def resolve_registry(registry: str | None, lab: str, *, push: bool, say: Callable[[str], None]) -> str | None:
    """Where packages go and dependencies point: ``--registry``, else the lab's; when the lab has
    none, a build without ``push`` names :data:`FALLBACK_REGISTRY` (said on stderr)."""
    if registry:
        return registry
    from crdscope.base.labrecord import lab_registry

    try:
        return lab_registry(lab)
    except CrdscopeError as exc:
        if push:
            raise CrdscopeError(f"{exc} (or give --registry HOST:PORT)", exit_code=exc.exit_code) from None
        say(f"no lab registry ({exc}): dependencies name {FALLBACK_REGISTRY}; --registry names another")
        return None


def _parallel(function: Callable[[BuiltPackage], BuiltPackage], packages: list[BuiltPackage]) -> list[BuiltPackage]:
    # crank is one process per package: a couple at once keeps both cores busy without swamping them.
    workers = max(1, min(4, os.cpu_count() or 1, len(packages)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(function, package) for package in packages]
        try:
            return [future.result() for future in futures]
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)  # the first failure is the one reported
            raise


def _write_root(plan: PackagePlan, work: Path, metadata: dict[str, Any]) -> Path:
    """The package root crank builds from: ``crossplane.yaml`` and ``crds/`` (moved from the staging)."""
    root = work / "roots" / plan.name
    (root / "crds").mkdir(parents=True)
    (root / "crossplane.yaml").write_text(yaml.safe_dump(metadata, sort_keys=False))
    for crd in plan.crds:
        os.replace(work / "crds" / f"{crd}.yaml", root / "crds" / f"{crd}.yaml")
    return root


def build_packages(source: Source, *, name: str, family: bool = False, safe_start: bool = False,
                   push: bool = False, registry: str | None = None, lab: str = "",
                   version: str = DEFAULT_VERSION, output: Path = Path("."),
                   say: Callable[[str], None] = _say) -> PackageRun:
    """Build (and with ``push``, push) the packages of ``source``; every failure is a one-line error."""
    check_flags(name, version, registry)
    chosen = resolve_registry(registry, lab, push=push, say=say) if (push or family or registry) else None
    if push:
        assert chosen is not None  # resolve_registry raises instead when pushing
        registry_reachable(chosen)
    output = Path(os.path.abspath(output))  # crank runs in each package root: every path it gets is absolute
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--output {output}: {exc.strerror or exc}") from None
    # Staging beside the output: moving a CRD file into its package root is a rename.
    with tempfile.TemporaryDirectory(prefix=".crdscope-package-", dir=output) as staging:
        work = Path(staging)
        (work / "crds").mkdir()
        say(f"reading {source.spec}")
        staged = stage_crds(source, work / "crds")
        plans = plan_packages(staged.groups, name, family=family)
        for problem in staged.skipped:
            say(f"skipped {problem.origin}: {problem.reason}")
        crank = crank_binary(say)  # after reading: a source without CRDs fails before any Go build
        say(f"building {len(plans)} package{'s' if len(plans) != 1 else ''} of {len(staged.groups)} CRDs with crank")
        packages = [BuiltPackage(plan, output / f"{plan.name}-{version}.xpkg",
                                 package_metadata(plan, safe_start=safe_start, version=version, registry=chosen))
                    for plan in plans]

        def build(package: BuiltPackage) -> BuiltPackage:
            root = _write_root(package.plan, work, package.metadata)
            # --examples-root inside the root and absent: crank's default (./examples) is the cwd's.
            run_crank(crank, ["xpkg", "build", f"--package-root={root}", f"--package-file={package.file}",
                              f"--examples-root={root / 'examples'}"], f"crank xpkg build {package.plan.name}",
                      cwd=root)
            return package

        built = _parallel(build, packages)
    if push:
        assert chosen is not None
        built = push_packages(built, chosen, version=version, crank=crank, say=say)
    return PackageRun(source.spec, version, chosen, push, built, staged.not_crds, len(staged.skipped))


def push_packages(packages: list[BuiltPackage], registry: str, *, version: str, crank: Path,
                  say: Callable[[str], None] = _say, config: RegistryConfig | None = None) -> list[BuiltPackage]:
    """``crank xpkg push`` of each package to ``REGISTRY/crdscope/<package>:<version>`` (built ones,
    or ones built earlier and kept, as the demo's cache does); each comes back with its reference.
    ``config``: the ``config.json`` crank reads (the lab's own, for its authenticated registry)."""

    def publish(package: BuiltPackage) -> BuiltPackage:
        reference = f"{repository(registry, package.plan.name)}:{version}"
        run_crank(crank, ["xpkg", "push", f"--package-files={package.file}", reference],
                  f"crank xpkg push {reference}", registry=registry, config=config)
        return BuiltPackage(package.plan, package.file, package.metadata, reference)

    say(f"pushing to {registry}/{ORGANISATION}")
    return _parallel(publish, packages)
