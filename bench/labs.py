"""Labs for benchmarks: a fresh control plane loaded with a slice of a real CRD set."""

from __future__ import annotations

import contextlib
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Iterator

from lab.binaries import ensure_binaries
from lab.controlplane import Lab, LabState
from probes.paths import cache_dir

from .common import SHARED_CRDS


def crd_dir(set_name: str, size: int | None) -> Path:
    """The first ``size`` CRD files (sorted) of a shared archive, unpacked once into the cache."""
    archive = SHARED_CRDS / f"{set_name}.tar.xz"
    if not archive.exists():
        raise SystemExit(f"bench: {archive} is absent (real CRD sets live beside the checkout)")
    target = cache_dir() / "bench-crds" / f"{set_name}-{size or 'all'}"
    stamp = target / ".complete"
    if stamp.exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "r:xz") as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile() and m.name.endswith(".yaml")),
                         key=lambda m: m.name)
        for member in members[:size] if size else members:
            (target / Path(member.name).name).write_bytes(tar.extractfile(member).read())
    stamp.write_text("")
    return target


def kubectl(state: LabState, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    """The real kubectl against a lab (admin context)."""
    return subprocess.run(["kubectl", f"--kubeconfig={state.kubeconfig}", *args], capture_output=True,
                          text=True, timeout=timeout, check=True)


def apply_and_wait(state: LabState, directory: Path) -> None:
    """Install a directory of CRDs with kubectl (the neutral reference) and wait until Established."""
    kubectl(state, "apply", "--server-side", "-f", str(directory))
    kubectl(state, "wait", "--for=condition=established", "--timeout=1200s", "crd", "--all")


@contextlib.contextmanager
def fresh_lab() -> Iterator[LabState]:
    """A lab of its own, torn down afterwards."""
    with tempfile.TemporaryDirectory(prefix="crdscope-bench-") as home:
        lab = Lab(Path(home))
        state = lab.up(ensure_binaries())
        try:
            yield state
        finally:
            lab.down()


@contextlib.contextmanager
def loaded_lab(set_name: str, size: int | None) -> Iterator[LabState]:
    """A fresh lab holding ``size`` CRDs of ``set_name`` (all Established)."""
    with fresh_lab() as state:
        apply_and_wait(state, crd_dir(set_name, size))
        yield state
