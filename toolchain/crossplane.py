"""Crossplane's core (``crossplane``), its CLI (``crank``) and ``crane``, built from Go modules.

Two module graphs, each pinned by a ``go.mod`` under this folder:

- ``crossplane-module`` (Crossplane v2.0.0): the core, the CLI and crane in one ``go build``.  The
  CLI (``crossplane xpkg build/push``, which ``crdscope package`` runs) left the core repository
  after v2.0 (crossplane/cli, which the Go module proxy here does not serve; v2.4.2's module holds
  ``cmd/crossplane`` only), so every core release uses this build's ``crank`` and ``crane``.
- ``crossplane-v2.4-module`` (Crossplane v2.4.2): the core alone, the lab's default.

Each build is cached in ``~/.cache/crdscope/crossplane/VERSION`` (``bin/``, the core CRDs in
``crds/``, ``build.json``).  The lab runs a core; the loader builds and pushes packages with the
CLI and pulls OCI references with crane.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from crdscope.base.errors import LabError
from crdscope.base.paths import cache_dir

from .gobuild import go_build, go_env

#: The CLI's module: crank and crane, and the v2.0 core they were released with.
MODULE_DIR = Path(__file__).with_name("crossplane-module")
CROSSPLANE_MODULE = "github.com/crossplane/crossplane/v2"
CORE_PACKAGE = f"{CROSSPLANE_MODULE}/cmd/crossplane"
PACKAGES = (CORE_PACKAGE, f"{CROSSPLANE_MODULE}/cmd/crank", "github.com/google/go-containerregistry/cmd/crane")


@dataclass(frozen=True)
class CoreRelease:
    """A Crossplane release line the lab can run: its module and how its build differs from the release."""

    #: ``v2.4``: what ``--crossplane-version`` names
    line: str
    module_dir: Path
    #: Where the build is not the release as tagged (empty: it is)
    note: str = ""

    @property
    def version(self) -> str:
        """The release its ``go.mod`` pins (``v2.4.2``)."""
        return pinned_version(self.module_dir / "go.mod")

    @property
    def packages(self) -> tuple[str, ...]:
        """What its build makes: the CLI's module makes all three, the others the core alone."""
        return PACKAGES if self.module_dir == MODULE_DIR else (CORE_PACKAGE,)


#: The release lines the lab runs, the default first (``lab up --crossplane``, every Crossplane test).
RELEASES = (
    CoreRelease("v2.4", MODULE_DIR.with_name("crossplane-v2.4-module"),
                note="built against crossplane-runtime v2.4.0: the Go module proxy here refuses v2.4.2, "
                     "which the release pins"),
    CoreRelease("v2.0", MODULE_DIR),
)
#: The release whose module holds the CLI and crane.
CLI_RELEASE = RELEASES[1]


@dataclass(frozen=True)
class CrossplaneBinaries:
    """The core (``crossplane``), the CLI (``crank``), ``crane`` and the core CRDs, of one core version."""

    crossplane: Path
    crank: Path
    crane: Path
    crds: Path
    #: the core's version (``v2.4.2``)
    version: str
    #: the release ``crank`` and ``crane`` were built from (``v2.0.0``)
    cli_version: str = ""


def pinned_version(go_mod: Path = MODULE_DIR / "go.mod") -> str:
    """The Crossplane version a module's ``go.mod`` pins (``v2.0.0``)."""
    match = re.search(rf"^\s*{re.escape(CROSSPLANE_MODULE)}\s+(v\S+)", go_mod.read_text(), re.M)
    if not match:
        raise LabError(f"{go_mod} does not pin {CROSSPLANE_MODULE}")
    return match.group(1)


def release_of(version: str | None = None) -> CoreRelease:
    """The release ``--crossplane-version`` names (``2.4``, ``v2.4``, ``v2.4.2``; None: the default),
    or a one-line error listing the others (exit 2)."""
    if not version:
        return RELEASES[0]
    wanted = version if version.startswith("v") else f"v{version}"
    for release in RELEASES:
        if wanted in (release.line, release.version):
            return release
    shown = ", ".join(f"{r.line} ({r.version})" for r in RELEASES)
    raise LabError(f"Crossplane {version} is not one the lab runs (supported: {shown})", exit_code=2)


def default_version() -> str:
    """The core version ``lab up --crossplane`` runs when none is named."""
    return RELEASES[0].version


def binaries_dir(version: str | None = None) -> Path:
    """Where the built binaries of ``version`` (default: the default core) are cached."""
    return cache_dir() / "crossplane" / (version or default_version()) / "bin"


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def cached_binaries(version: str | None = None) -> CrossplaneBinaries | None:
    """The cached binaries of core ``version`` (default: the default core) with the CLI's crank and
    crane, or None when any is missing."""
    version = version or default_version()
    directory, cli = binaries_dir(version), binaries_dir(CLI_RELEASE.version)
    found = CrossplaneBinaries(directory / "crossplane", cli / "crank", cli / "crane", directory.parent / "crds",
                               version, CLI_RELEASE.version)
    if all(_executable(p) for p in (found.crossplane, found.crank, found.crane)) and any(found.crds.glob("*.yaml")):
        return found
    return None


def build_record(version: str) -> dict[str, object]:
    """What a cached build's ``build.json`` says (its seconds, modules downloaded); empty when none."""
    try:
        record = json.loads((binaries_dir(version).parent / "build.json").read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def crossplane_binaries(progress: Callable[[str], None] | None = None,
                        version: str | None = None) -> CrossplaneBinaries:
    """The cached binaries of core ``version`` (default: the default core), built first when missing:
    the CLI's module (crank, crane; minutes when cold), then that core's."""
    release = release_of(version)
    found = cached_binaries(release.version)
    if found:
        return found
    if not shutil.which("go"):
        raise LabError("Crossplane is built from Go modules and Go is not installed "
                       "(see the README: `make system-deps`)")
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    for needed in releases_to_build(release.version):
        _build(needed, say)
    found = cached_binaries(release.version)
    assert found is not None
    return found


def releases_to_build(version: str | None = None) -> list[CoreRelease]:
    """The builds core ``version`` (default: the default core) still needs, in build order: the CLI's
    module first (crank and crane), then the core's own; empty when both are cached."""
    release = release_of(version)
    return [needed for needed in dict.fromkeys((CLI_RELEASE, release)) if not _built(needed)]


def _built(release: CoreRelease) -> bool:
    directory = binaries_dir(release.version)
    names = [Path(p).name for p in release.packages]
    return all(_executable(directory / name) for name in names) and any((directory.parent / "crds").glob("*.yaml"))


def _build(release: CoreRelease, say: Callable[[str], None]) -> None:
    """One ``go build`` of a release's packages into the cache, with its core CRDs."""
    version = release.version
    target = binaries_dir(version)
    target.mkdir(parents=True, exist_ok=True)
    names = [Path(p).name for p in release.packages]
    say(f"building Crossplane {version} ({', '.join(n.replace('crossplane', 'core') for n in names)}) "
        f"from Go modules into {target}" + (f"; {release.note}" if release.note else ""))
    env = go_env()
    with tempfile.TemporaryDirectory(dir=target) as staging:
        figures = go_build(release.module_dir, list(release.packages), Path(staging), ldflags="-s -w", say=say,
                           env=env)
        for name in names:
            os.replace(Path(staging) / name, target / name)
    _copy_core_crds(release, target.parent / "crds", env)
    (target.parent / "build.json").write_text(json.dumps({"crossplane": version, **figures, "note": release.note,
                                                           "built_at": time.time()}))
    say(f"built Crossplane {version} in {figures['seconds']:.0f}s")


def _copy_core_crds(release: CoreRelease, target: Path, env: dict[str, str]) -> None:
    """The core CRDs ``core init`` applies: the module's ``cluster/crds``, from the module cache."""
    spec = f"{CROSSPLANE_MODULE}@{release.version}"
    done = subprocess.run(["go", "mod", "download", "-json", spec], cwd=release.module_dir,
                          env=env, capture_output=True, text=True, check=False)
    try:
        source = Path(json.loads(done.stdout)["Dir"]) / "cluster" / "crds"
    except (ValueError, KeyError):
        raise LabError(f"cannot find {spec} in the Go module cache") from None
    staging = target.with_name("crds.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source, staging)
    for path in staging.rglob("*"):
        path.chmod(0o644 if path.is_file() else 0o755)  # the module cache is read-only
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)
