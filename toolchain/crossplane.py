"""Crossplane's core (``crossplane``), its CLI (``crank``) and ``crane``, built from one Go module graph.

``toolchain/crossplane-module/go.mod`` pins the versions; one ``go build`` makes all three, cached
in ``~/.cache/crdscope/crossplane/VERSION``.  The lab runs the core; the loader builds and pushes
packages with the CLI and pulls OCI references with crane.
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

MODULE_DIR = Path(__file__).with_name("crossplane-module")
CROSSPLANE_MODULE = "github.com/crossplane/crossplane/v2"
PACKAGES = (f"{CROSSPLANE_MODULE}/cmd/crossplane", f"{CROSSPLANE_MODULE}/cmd/crank",
            "github.com/google/go-containerregistry/cmd/crane")


@dataclass(frozen=True)
class CrossplaneBinaries:
    """The core (``crossplane``), the CLI (``crank``), ``crane`` and the core CRDs, of one version."""

    crossplane: Path
    crank: Path
    crane: Path
    crds: Path
    version: str


def pinned_version(go_mod: Path = MODULE_DIR / "go.mod") -> str:
    """The Crossplane version ``toolchain/crossplane-module/go.mod`` pins (``v2.0.0``)."""
    match = re.search(rf"^\s*{re.escape(CROSSPLANE_MODULE)}\s+(v\S+)", go_mod.read_text(), re.M)
    if not match:
        raise LabError(f"{go_mod} does not pin {CROSSPLANE_MODULE}")
    return match.group(1)


def binaries_dir(version: str | None = None) -> Path:
    """Where the built binaries of ``version`` are cached."""
    return cache_dir() / "crossplane" / (version or pinned_version()) / "bin"


def cached_binaries(version: str | None = None) -> CrossplaneBinaries | None:
    """The cached binaries, or None when any is missing."""
    version = version or pinned_version()
    directory = binaries_dir(version)
    found = CrossplaneBinaries(directory / "crossplane", directory / "crank", directory / "crane",
                               directory.parent / "crds", version)
    executables = (found.crossplane, found.crank, found.crane)
    if all(p.is_file() and os.access(p, os.X_OK) for p in executables) and any(found.crds.glob("*.yaml")):
        return found
    return None


def crossplane_binaries(progress: Callable[[str], None] | None = None) -> CrossplaneBinaries:
    """The cached Crossplane binaries, built first (one ``go build``, minutes when cold) if missing."""
    found = cached_binaries()
    if found:
        return found
    if not shutil.which("go"):
        raise LabError("Crossplane is built from Go modules and Go is not installed "
                       "(see the README: `make system-deps`)")
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    version = pinned_version()
    target = binaries_dir(version)
    target.mkdir(parents=True, exist_ok=True)
    say(f"building Crossplane {version} (core, crank) and crane from Go modules into {target}")
    env = go_env()
    with tempfile.TemporaryDirectory(dir=target) as staging:
        figures = go_build(MODULE_DIR, list(PACKAGES), Path(staging), ldflags="-s -w", say=say, env=env)
        for name in ("crossplane", "crank", "crane"):
            os.replace(Path(staging) / name, target / name)
    _copy_core_crds(version, target.parent / "crds", env)
    (target.parent / "build.json").write_text(json.dumps({"crossplane": version, **figures,
                                                           "built_at": time.time()}))
    say(f"built Crossplane {version} in {figures['seconds']:.0f}s")
    found = cached_binaries(version)
    assert found is not None
    return found


def _copy_core_crds(version: str, target: Path, env: dict[str, str]) -> None:
    """The core CRDs ``core init`` applies: the module's ``cluster/crds``, from the module cache."""
    done = subprocess.run(["go", "mod", "download", "-json", f"{CROSSPLANE_MODULE}@{version}"], cwd=MODULE_DIR,
                          env=env, capture_output=True, text=True, check=False)
    try:
        source = Path(json.loads(done.stdout)["Dir"]) / "cluster" / "crds"
    except (ValueError, KeyError):
        raise LabError(f"cannot find {CROSSPLANE_MODULE}@{version} in the Go module cache") from None
    staging = target.with_name("crds.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source, staging)
    for path in staging.rglob("*"):
        path.chmod(0o644 if path.is_file() else 0o755)  # the module cache is read-only
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)
