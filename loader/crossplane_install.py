"""A real provider install through the lab's Crossplane, for the demo (``crdscope lab --crossplane``).

Three parts, none of which knows a screen (the monitor narrates what :func:`run_install` says):

- :func:`prepare_packages`: the family packages of a source, built once by
  :func:`loader.package.build_packages` (safe-start) and kept under the XDG cache, keyed by the
  source file's size and mtime and the Crossplane version, then pushed to the lab's registry.
  The packages name :data:`PACKAGE_HOST`, a registry that never resolves (``.invalid``), in
  their ``dependsOn``; an ImageConfig rewrites it to the lab's registry.  That is why one build
  serves every lab although each lab's registry listens on a port of its own.
- :func:`plan_install`: which objects, in which order, and what each stage waits for: the
  ImageConfig; the family package's Provider (until Installed: its members depend on it, and a
  member applied first would make Crossplane's resolver install the family under a name of its
  own); every member's Provider (until every MRD is there, all Inactive under safe-start: no
  CRD yet); an MRAP activating the largest member's kinds (until their CRDs are Established).
- :func:`plan_reference_install`: the same for a package named by an OCI reference
  (``--provider REGISTRY/REPO:TAG``): nothing built, one Provider naming the reference.
- :func:`run_install`: applies each stage (server-side apply, as the lab's admin) and waits on
  it, polling cheap reads (Providers; MRDs as a Table), saying one line per stage.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crdscope.base.errors import ConfigError
from crdscope.base.paths import cache_dir

from .documents import Source
from .package import (
    DEFAULT_VERSION, PACKAGE_HOST, BuiltPackage, PackagePlan, build_packages, push_packages, repository,
)
from .registry_auth import RegistryConfig
from .synthetic import PROVIDER_NAME, SyntheticSource, generator_digest, is_synthetic

if TYPE_CHECKING:
    from .oci import OciSource

IMAGE_CONFIG = "crdscope-lab-registry"
#: The ImageConfig giving every package of an authenticated registry its pull secret (dependencies too:
#: Crossplane's resolver copies no ``packagePullSecrets`` to the Providers it creates).
AUTH_IMAGE_CONFIG = "crdscope-lab-registry-auth"
MRAP_NAME = "crdscope-demo"
FIELD_MANAGER = "crdscope-demo"
#: Bumped when what a cached build holds changes (the key of every cached build changes with it).
CACHE_FORMAT = 1
MANIFEST = "packages.json"
POLL_SECONDS = 3.0
#: Measured on 2 shared cores: the 81 GCP Providers' 817 MRDs took about 5 minutes, 192 CRDs 2 more.
INSTALLED_TIMEOUT = 300.0
MRDS_TIMEOUT = 1200.0
ESTABLISHED_TIMEOUT = 900.0

PROVIDERS = "/apis/pkg.crossplane.io/v1/providers"
MRDS = "/apis/apiextensions.crossplane.io/v1alpha1/managedresourcedefinitions"
PATHS = {"ImageConfig": "/apis/pkg.crossplane.io/v1beta1/imageconfigs", "Provider": PROVIDERS,
         "ManagedResourceActivationPolicy":
             "/apis/apiextensions.crossplane.io/v1alpha1/managedresourceactivationpolicies"}


# --------------------------------------------------------------------------- the packages


def package_name_of(spec: str) -> str:
    """The package NAME for a source: its file name without archive suffixes (``provider-gcp``);
    ``synthetic:N`` is :data:`loader.synthetic.PROVIDER_NAME` (its family ``provider-family-synthetic``)."""
    if is_synthetic(spec):
        return PROVIDER_NAME
    base = Path(spec.rstrip("/")).name
    for suffix in (".xz", ".gz", ".tar", ".tgz", ".yaml", ".yml", ".xpkg"):
        base = base.removesuffix(suffix)
    cleaned = "".join(c if c.isalnum() else "-" for c in base.lower()).strip("-")[:50].strip("-")
    return cleaned if cleaned and cleaned[0].isalpha() else f"provider-{cleaned or 'demo'}"


def cache_key(source: Source, crossplane_version: str, name: str) -> str | None:
    """What a cached build depends on: the source (a file: its path, size and mtime; ``synthetic:N``:
    its count, seed, schema size and generator), Crossplane, the name, the format; None for a source
    with no such identity (a directory, stdin, another cluster: built each time)."""
    if isinstance(source, SyntheticSource):
        # No file to stat: the set is a pure function of these (and of the code that generates it).
        identity: dict[str, Any] = {"source": source.key, "generator": generator_digest()}
    elif (path := Path(source.spec)).is_file():
        stat = path.stat()
        identity = {"source": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    else:
        return None
    facts = {**identity, "crossplane": crossplane_version, "name": name, "host": PACKAGE_HOST,
             "version": DEFAULT_VERSION, "format": CACHE_FORMAT}
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:20]


def packages_cache() -> Path:
    """Where built demo packages are kept (``$XDG_CACHE_HOME/crdscope/provider-packages``)."""
    return cache_dir() / "provider-packages"


def _write_manifest(directory: Path, packages: list[BuiltPackage]) -> None:
    entries = [{"plan": dataclasses.asdict(p.plan), "file": p.file.name, "metadata": p.metadata} for p in packages]
    (directory / MANIFEST).write_text(json.dumps(entries))


def read_manifest(directory: Path) -> list[BuiltPackage] | None:
    """The packages of a cached build, or None when it is incomplete (no manifest, a file missing)."""
    try:
        entries = json.loads((directory / MANIFEST).read_text())
        packages = [BuiltPackage(_plan_of(e["plan"]), directory / e["file"], e["metadata"]) for e in entries]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return packages if all(p.file.is_file() for p in packages) else None


def _plan_of(fields: dict[str, Any]) -> PackagePlan:
    return PackagePlan(name=str(fields["name"]), crds=tuple(fields["crds"]), groups=tuple(fields["groups"]),
                       family=fields.get("family"), depends_on=fields.get("depends_on"))


@contextmanager
def built_packages(source: Source, *, name: str, crossplane_version: str,
                   say: Callable[[str], None]) -> Iterator[list[BuiltPackage]]:
    """The safe-start family packages of ``source``: from the cache when built before, else built
    (and kept when the source is a file or ``synthetic:N``; others are built each time into a temporary folder)."""
    key = cache_key(source, crossplane_version, name)
    if key is None:
        with tempfile.TemporaryDirectory(prefix="crdscope-packages-") as scratch:
            yield _build(source, name, Path(scratch), say)
        return
    directory = packages_cache() / key
    cached = read_manifest(directory)
    if cached is not None:
        say(f"{len(cached)} packages of {Path(source.spec).name} from the cache ({directory})")
        yield cached
        return
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=directory.parent))
    try:
        packages = _build(source, name, staging, say)
        _write_manifest(staging, packages)
        shutil.rmtree(directory, ignore_errors=True)
        try:
            os.replace(staging, directory)  # the cache holds a whole build or none
        except OSError:
            if read_manifest(directory) is None:  # not another demo's build of the same key, finished first
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    found = read_manifest(directory)
    assert found is not None
    yield found


def _build(source: Source, name: str, output: Path, say: Callable[[str], None]) -> list[BuiltPackage]:
    started = time.monotonic()
    run = build_packages(source, name=name, family=True, safe_start=True, registry=PACKAGE_HOST,
                         output=output, say=say)
    say(f"built {len(run.packages)} packages of {sum(len(p.plan.crds) for p in run.packages)} CRDs "
        f"in {time.monotonic() - started:.0f}s")
    return run.packages


def prepare_packages(source: Source, *, name: str, registry: str, crank: Path, crossplane_version: str,
                     say: Callable[[str], None], config: RegistryConfig | None = None) -> list[BuiltPackage]:
    """The demo's packages of ``source`` (cached or built), pushed to ``registry`` (the lab's; ``config``:
    its credentials when it asks for them)."""
    with built_packages(source, name=name, crossplane_version=crossplane_version, say=say) as packages:
        started = time.monotonic()
        pushed = push_packages(packages, registry, version=DEFAULT_VERSION, crank=crank, say=say, config=config)
        say(f"pushed {len(pushed)} packages in {time.monotonic() - started:.0f}s")
        return pushed


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Stage:
    """Objects applied together, then what the stage waits for before the next one."""

    #: one short line, said when the stage starts
    says: str
    objects: tuple[dict[str, Any], ...]
    #: "installed" (Providers), "mrds" (MRDs present), "established" (MRDs' CRDs Established) or ""
    wait: str
    #: the Providers, or the MRD (= CRD) names, waited for
    names: tuple[str, ...] = ()
    timeout: float = 0.0


def package_reference(package: str) -> str:
    """What a Provider names: ``PACKAGE_HOST/crdscope/<package>:<version>`` (rewritten on pull)."""
    return f"{repository(PACKAGE_HOST, package)}:{DEFAULT_VERSION}"


def image_config(registry: str) -> dict[str, Any]:
    """The ImageConfig pulling every :data:`PACKAGE_HOST` package from the lab's ``registry``."""
    return {"apiVersion": "pkg.crossplane.io/v1beta1", "kind": "ImageConfig", "metadata": {"name": IMAGE_CONFIG},
            "spec": {"matchImages": [{"type": "Prefix", "prefix": f"{PACKAGE_HOST}/"}],
                     "rewriteImage": {"prefix": f"{registry}/"}}}


def pull_secret_config(registry: str, secret: str) -> dict[str, Any]:
    """The ImageConfig giving every package pulled from ``registry`` the pull secret ``secret``."""
    return {"apiVersion": "pkg.crossplane.io/v1beta1", "kind": "ImageConfig", "metadata": {"name": AUTH_IMAGE_CONFIG},
            "spec": {"matchImages": [{"type": "Prefix", "prefix": f"{registry}/"}],
                     "registry": {"authentication": {"pullSecretRef": {"name": secret}}}}}


def provider(package: str, pull_secret: str | None = None, *, reference: str | None = None,
             name: str | None = None) -> dict[str, Any]:
    """A Provider object installing ``package`` (``reference``: named by it as it is), pulled on every
    read (``packagePullPolicy: Always``), with ``spec.packagePullSecrets`` when the registry asks for
    credentials.

    Why Always: Crossplane v2.4's package client tees each pull into its package cache and, when
    the pull is cut short (a reconcile's deadline passing mid-read on a loaded machine), closes the
    cache entry as if complete. The next read parses that prefix: a revision Healthy with 2 of its
    14 MRDs, and truncated or nameless MRDs it keeps failing to apply (seen in the lab: 39 of 74
    revisions short, the install stuck at 243 of 800 MRDs; crossplane#7817 reports the same
    truncation). Always skips the cache read, so a cut pull is an error Crossplane retries."""
    spec: dict[str, Any] = {"package": reference or package_reference(package), "packagePullPolicy": "Always"}
    if pull_secret:
        spec["packagePullSecrets"] = [{"name": pull_secret}]
    return {"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider", "metadata": {"name": name or package},
            "spec": spec}


def activation_policy(patterns: list[str]) -> dict[str, Any]:
    """The demo's MRAP activating ``patterns``."""
    return {"apiVersion": "apiextensions.crossplane.io/v1alpha1", "kind": "ManagedResourceActivationPolicy",
            "metadata": {"name": MRAP_NAME}, "spec": {"activate": patterns}}


def plan_install(packages: list[PackagePlan], registry: str, pull_secret: str | None = None) -> list[Stage]:
    """The install, stage by stage (see the module doc); ``packages`` as built (family package first);
    ``pull_secret``: the Secret Crossplane pulls from ``registry`` with (it asks for credentials)."""
    if not packages:
        raise ConfigError("no packages to install")
    anchor = next((p for p in packages if p.family == p.name), None)
    members = [p for p in packages if p is not anchor]
    every = _mrds_of(crd for p in packages for crd in p.crds)
    stages = [Stage(f"ImageConfig {IMAGE_CONFIG}: {PACKAGE_HOST} packages come from the lab's registry {registry}"
                    + (f" with the pull secret {pull_secret}" if pull_secret else ""),
                    (image_config(registry), *([pull_secret_config(registry, pull_secret)] if pull_secret else [])),
                    "")]
    if anchor is not None:
        stages.append(Stage(f"Provider {anchor.name}: the family package first ({len(anchor.crds)} CRDs; "
                            "its members depend on it)", (provider(anchor.name, pull_secret),), "installed",
                            (anchor.name,), INSTALLED_TIMEOUT))
    if members:
        stages.append(Stage(f"{len(members)} member Providers: revisions, then {len(every)} MRDs, Inactive "
                            "(safe-start: no CRD until an MRAP)", tuple(provider(p.name, pull_secret) for p in members),
                            "mrds", every, MRDS_TIMEOUT))
    else:
        stages[-1] = dataclasses.replace(stages[-1], wait="mrds", names=every, timeout=MRDS_TIMEOUT)
    chosen = max(members or packages, key=lambda p: (len(p.crds), p.name))
    patterns = [f"*.{group}" for group in chosen.groups]
    activated = _mrds_of(chosen.crds)
    stages.append(Stage(f"MRAP {MRAP_NAME} activates {chosen.name} ({', '.join(patterns)}): "
                        f"{len(activated)} CRDs to be Established", (activation_policy(patterns),),
                        "established", activated, ESTABLISHED_TIMEOUT))
    return stages


def _mrds_of(crds: Iterable[str]) -> tuple[str, ...]:
    """The CRDs of provider packages that Crossplane makes MRDs of (sorted): the stages wait for those.
    ProviderConfig kinds stay CRDs on Crossplane v2.4 (:data:`base.crossplane.PLAIN_CRD_KINDS`), Established
    at install; v2.0 makes MRDs of them too, which the stages then do not wait for."""
    from crdscope.base.crossplane import becomes_mrd

    return tuple(sorted(name for name in crds if becomes_mrd(name)))


def plan_reference_install(source: OciSource, pull_secret: str | None = None) -> list[Stage]:
    """The install of a package named by reference (``--provider REGISTRY/REPO:TAG``): nothing is built
    or pushed; one Provider names the reference and Crossplane pulls it and resolves its dependencies
    itself, as it would in any cluster (the lab's registry is on loopback, which Crossplane reaches
    over plain HTTP; another registry must be reachable from this machine).  ``pull_secret``: the
    Secret for the reference's registry (the lab's, when it asks for credentials): named by the
    Provider's ``packagePullSecrets`` and by an ImageConfig for its dependencies.

    Stages: an ImageConfig when a package names :data:`PACKAGE_HOST` in its dependencies (the demo's
    own packages, pushed elsewhere); the Provider, until every MRD of it and its dependencies is
    there; an MRAP of the named package's groups, until their CRDs are Established."""
    from .oci import crd_groups, dependencies

    if not source.packages:
        source.prepare()
    per_package = crd_groups(source)
    named = per_package[source.packages[0].reference] or [row for rows in per_package.values() for row in rows]
    every = _mrds_of({name for rows in per_package.values() for name, _ in rows})
    name = source.reference.name.replace("_", "-").strip("-.")[:63] or "provider"
    stages = []
    if any(repository.startswith(f"{PACKAGE_HOST}/") for package in source.packages
           for repository, _ in dependencies(package.metadata)):
        stages.append(Stage(f"ImageConfig {IMAGE_CONFIG}: {PACKAGE_HOST} packages come from "
                            f"{source.reference.host}", (image_config(source.reference.host),), ""))
    if pull_secret:
        stages.append(Stage(f"ImageConfig {AUTH_IMAGE_CONFIG}: packages from {source.reference.host} are pulled "
                            f"with the pull secret {pull_secret}",
                            (pull_secret_config(source.reference.host, pull_secret),), ""))
    obj = provider(name, pull_secret, reference=source.spec)
    more = len(source.packages) - 1
    stages.append(Stage(f"Provider {name}: {source.spec}, pulled by Crossplane"
                        + (f" with {more} dependenc{'ies' if more != 1 else 'y'}" if more else "")
                        + f": {len(every)} MRDs", (obj,), "mrds", every, MRDS_TIMEOUT))
    patterns = sorted({f"*.{group}" for _, group in named})
    activated = _mrds_of({crd for crd, _ in named})
    stages.append(Stage(f"MRAP {MRAP_NAME} activates {source.reference.name} ({', '.join(patterns)}): "
                        f"{len(activated)} CRDs to be Established", (activation_policy(patterns),), "established",
                        activated, ESTABLISHED_TIMEOUT))
    return stages


# --------------------------------------------------------------------------- running it


class LabClient:
    """The lab's API server as its admin (the demo writes Crossplane objects: the lab's own user)."""

    def __init__(self, server: str, pki_dir: str | Path) -> None:
        import httpx

        from crdscope.base.labrecord import admin_tls

        self.http = httpx.Client(base_url=server, verify=admin_tls(Path(pki_dir)), timeout=30,
                                 headers={"User-Agent": "crdscope-demo"})

    def close(self) -> None:
        """Close the connection."""
        self.http.close()

    def apply(self, obj: dict[str, Any]) -> None:
        """Server-side apply of one object (its kind must be in :data:`PATHS`)."""
        response = self.http.patch(f"{PATHS[obj['kind']]}/{obj['metadata']['name']}",
                                   params={"fieldManager": FIELD_MANAGER, "force": "true"},
                                   content=json.dumps(obj),
                                   headers={"Content-Type": "application/apply-patch+yaml"})
        if response.status_code >= 300:
            reason = (response.json().get("message") if response.headers.get("content-type", "").startswith(
                "application/json") else "") or f"HTTP {response.status_code}"
            raise ConfigError(f"cannot apply {obj['kind']} {obj['metadata']['name']}: {reason}")

    def installed(self) -> set[str]:
        """Providers whose Installed condition is True."""
        from crdscope.connection.crossplane_read import parse_provider

        response = self.http.get(PROVIDERS, params={"resourceVersion": "0"})
        response.raise_for_status()
        return {p.name for p in map(parse_provider, response.json().get("items") or []) if p.installed == "True"}

    def mrds(self) -> dict[str, bool]:
        """MRD name -> whether its CRD is Established (a Table: an MRD embeds a whole schema)."""
        from crdscope.connection.crossplane_read import TABLE_ACCEPT, parse_mrd_table

        response = self.http.get(MRDS, params={"resourceVersion": "0", "includeObject": "None"},
                                 headers={"Accept": TABLE_ACCEPT})
        response.raise_for_status()
        return {row.name: row.established for row in parse_mrd_table(response.json())}


def stage_done(stage: Stage, client: LabClient) -> tuple[bool, str]:
    """Whether ``stage`` has what it waits for, and how far it is (``12/817 MRDs``)."""
    if stage.wait == "installed":
        done = len(set(stage.names) & client.installed())
        what = "Installed"
    elif stage.wait == "mrds":
        done = len(set(stage.names) & set(client.mrds()))
        what = "MRDs"
    elif stage.wait == "established":
        wanted = set(stage.names)
        done = sum(1 for name, ok in client.mrds().items() if ok and name in wanted)
        what = "CRDs Established"
    else:
        return True, ""
    return done == len(stage.names), f"{done}/{len(stage.names)} {what}"


def run_install(stages: list[Stage], client: LabClient, *, say: Callable[[str], None],
                stop: threading.Event | None = None, poll: float = POLL_SECONDS) -> bool:
    """Apply and wait on each stage in turn, one line said per stage; False when ``stop`` is set
    (the monitor quit) or a stage timed out.

    A read that fails (the API server busy or restarting) is tried again at the next poll."""
    import httpx

    stop = stop or threading.Event()
    started = time.monotonic()
    for number, stage in enumerate(stages, start=1):
        say(f"{number}/{len(stages)} {stage.says}")
        for obj in stage.objects:
            if stop.is_set():
                return False
            client.apply(obj)
        deadline = time.monotonic() + stage.timeout
        progress = ""
        while not stop.is_set():
            try:
                done, progress = stage_done(stage, client)
            except (httpx.HTTPError, ValueError) as exc:
                done, progress = False, progress or f"waiting ({type(exc).__name__})"
            if done:
                break
            if time.monotonic() > deadline:
                say(f"stage {number} not done after {stage.timeout:.0f}s: {progress}")
                return False
            stop.wait(poll)  # the poll interval, cut short when the monitor quits
        else:
            return False
        if progress:
            say(f"{number}/{len(stages)} done: {progress} ({time.monotonic() - started:.0f}s since the start)")
    return True
