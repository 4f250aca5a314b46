"""Find or build the lab's kube-apiserver and etcd.

The Kubernetes and etcd versions are written down in one place: ``lab/go.mod``
(the ``tool`` requirements ``k8s.io/kubernetes`` and ``go.etcd.io/etcd/server/v3``).
Binaries are built from those Go modules into
``$XDG_CACHE_HOME/crdscope/controlplane/<k8s-version>/`` and reused until the
versions change.  Users who already have binaries can point at them instead.
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
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable

from crdscope.probes.errors import CrdscopeError
from crdscope.probes.paths import cache_dir

GO_MOD = Path(__file__).with_name("go.mod")
APISERVER_PKG = "k8s.io/kubernetes/cmd/kube-apiserver"
ETCD_PKG = "go.etcd.io/etcd/server/v3"


class LabError(CrdscopeError):
    """The lab cannot be built, started or reached."""

    exit_code = 4


@dataclass(frozen=True)
class Versions:
    """The versions ``lab/go.mod`` pins."""

    kubernetes: str
    etcd: str


@dataclass(frozen=True)
class Binaries:
    """Paths of the two control-plane executables and where they came from."""

    apiserver: Path
    etcd: Path
    origin: str  # "flags", "KUBEBUILDER_ASSETS", "cache", "PATH", "built"
    kubernetes_version: str = ""


def pinned_versions(go_mod: Path = GO_MOD) -> Versions:
    """Read the pinned Kubernetes and etcd versions from ``lab/go.mod``."""
    text = go_mod.read_text()
    k8s = re.search(r"^\s*k8s\.io/kubernetes\s+(v\S+)", text, re.M)
    etcd = re.search(r"^\s*go\.etcd\.io/etcd/server/v3\s+(v\S+)", text, re.M)
    if not k8s or not etcd:
        raise LabError(f"{go_mod} does not pin k8s.io/kubernetes and go.etcd.io/etcd/server/v3")
    return Versions(kubernetes=k8s.group(1), etcd=etcd.group(1))


def build_dir(versions: Versions | None = None) -> Path:
    """The cache directory for one Kubernetes version's binaries."""
    versions = versions or pinned_versions()
    return cache_dir() / "controlplane" / versions.kubernetes


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_binaries(
    apiserver_bin: str | None = None,
    etcd_bin: str | None = None,
) -> Binaries | None:
    """Binaries the user already has, in order: flags, KUBEBUILDER_ASSETS, cache, PATH."""
    if apiserver_bin or etcd_bin:
        if not (apiserver_bin and etcd_bin):
            raise LabError("pass both --apiserver-bin and --etcd-bin")
        apiserver, etcd = Path(apiserver_bin).expanduser(), Path(etcd_bin).expanduser()
        for path in (apiserver, etcd):
            if not _executable(path):
                raise LabError(f"{path} is not an executable file")
        return Binaries(apiserver, etcd, "flags", binary_version(apiserver))
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if assets:
        apiserver, etcd = Path(assets) / "kube-apiserver", Path(assets) / "etcd"
        if _executable(apiserver) and _executable(etcd):
            return Binaries(apiserver, etcd, "KUBEBUILDER_ASSETS", binary_version(apiserver))
        raise LabError(f"KUBEBUILDER_ASSETS={assets} does not hold executable kube-apiserver and etcd")
    cached = cached_binaries()
    if cached:
        return cached
    on_path = shutil.which("kube-apiserver"), shutil.which("etcd")
    if all(on_path):
        apiserver = Path(on_path[0])
        return Binaries(apiserver, Path(on_path[1]), "PATH", binary_version(apiserver))
    return None


def cached_binaries(versions: Versions | None = None) -> Binaries | None:
    """The binaries built earlier for the pinned versions, if complete."""
    versions = versions or pinned_versions()
    directory = build_dir(versions)
    stamp = directory / "build.json"
    apiserver, etcd = directory / "kube-apiserver", directory / "etcd"
    if not (stamp.exists() and _executable(apiserver) and _executable(etcd)):
        return None
    try:
        built = json.loads(stamp.read_text())
    except ValueError:
        return None
    if built.get("kubernetes") != versions.kubernetes or built.get("etcd") != versions.etcd:
        return None
    return Binaries(apiserver, etcd, "cache", versions.kubernetes)


def binary_version(apiserver: Path) -> str:
    """``vX.Y.Z`` as reported by ``kube-apiserver --version`` (empty when unknown)."""
    try:
        out = subprocess.run(
            [str(apiserver), "--version"], capture_output=True, text=True, timeout=20, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    match = re.search(r"v\d+\.\d+\.\d+\S*", out)
    return match.group(0) if match else ""


def no_binaries_message() -> str:
    """Every way a user can provide the control plane, in one line."""
    return (
        "no kube-apiserver/etcd found and no Go toolchain to build them; either install Go "
        f"(then `crdscope lab build` builds {pinned_versions().kubernetes}), set KUBEBUILDER_ASSETS "
        "to a directory holding kube-apiserver and etcd (as envtest's setup-envtest does), "
        "pass --apiserver-bin and --etcd-bin, or put both on PATH"
    )


def ensure_binaries(
    apiserver_bin: str | None = None,
    etcd_bin: str | None = None,
    *,
    progress: Callable[[str], None] | None = None,
) -> Binaries:
    """Binaries from the user or the cache, else built from the Go modules."""
    found = find_binaries(apiserver_bin, etcd_bin)
    if found:
        return found
    if not shutil.which("go"):
        raise LabError(no_binaries_message())
    return build(progress=progress)


def _ldflags(kubernetes: str, built_at: float) -> str:
    # Stamp the version as Kubernetes' own build does (hack/lib/version.sh), so that
    # /version and kubectl report v1.X.Y rather than v0.0.0-master.
    match = re.match(r"v(\d+)\.(\d+)", kubernetes)
    major, minor = (match.group(1), match.group(2)) if match else ("0", "0")
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={kubernetes}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.buildDate={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(built_at))}",
        ]
    return " ".join(flags)


def _count_packages(packages: list[str], env: dict[str, str]) -> int:
    done = subprocess.run(
        ["go", "list", "-deps", *packages],
        cwd=GO_MOD.parent, env=env, capture_output=True, text=True, check=False,
    )
    return len(done.stdout.split()) if done.returncode == 0 else 0


def build(*, progress: Callable[[str], None] | None = None) -> Binaries:
    """Build kube-apiserver and etcd from the pinned Go modules into the cache.

    Progress (packages compiled out of the total) goes to ``progress``;
    the build takes minutes on two cores the first time.
    """
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    versions = pinned_versions()
    target = build_dir(versions)
    target.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -buildvcs=false"}
    started = time.monotonic()
    say(f"building kube-apiserver {versions.kubernetes} and etcd {versions.etcd} from Go modules into {target}")
    say("(downloading modules and compiling takes several minutes on a small machine)")
    total = _count_packages([APISERVER_PKG, ETCD_PKG], env)
    with tempfile.TemporaryDirectory(dir=target) as staging:
        argv = [
            "go", "build", "-v", "-trimpath",
            "-ldflags", _ldflags(versions.kubernetes, time.time()),
            "-o", staging + os.sep,
            APISERVER_PKG, ETCD_PKG,
        ]
        process = subprocess.Popen(
            argv, cwd=GO_MOD.parent, env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        compiled, downloaded, last_report, errors = 0, 0, 0.0, []
        assert process.stderr is not None
        for line in process.stderr:
            line = line.rstrip()
            if line.startswith("go: downloading"):
                downloaded += 1
            elif not line or line.startswith(("#", " ")) or ":" in line:
                errors.append(line)
                continue
            else:
                compiled += 1
            now = time.monotonic()
            if now - last_report >= 5:
                last_report = now
                share = f"{compiled}/{total}" if total else str(compiled)
                say(f"  [{now - started:4.0f}s] {downloaded} modules downloaded, {share} packages compiled")
        if process.wait() != 0:
            tail = "; ".join(e for e in errors[-5:] if e)
            raise LabError(f"go build failed: {tail or 'see output above'}")
        # A module path ending in /v3 names its binary after the element before it.
        produced = {"kube-apiserver": "kube-apiserver", "etcd": "server"}
        for name, built_name in produced.items():
            os.replace(Path(staging) / built_name, target / name)
    seconds = time.monotonic() - started
    (target / "build.json").write_text(
        json.dumps({"kubernetes": versions.kubernetes, "etcd": versions.etcd, "seconds": round(seconds, 1),
                    "built_at": time.time()})
    )
    say(f"built kube-apiserver {versions.kubernetes} and etcd {versions.etcd} in {seconds:.0f}s")
    return Binaries(target / "kube-apiserver", target / "etcd", "built", versions.kubernetes)
