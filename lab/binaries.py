"""Find or build the lab's kube-apiserver and etcd, for each supported Kubernetes minor.

The newest version is pinned in ``lab/go.mod`` (the ``tool`` requirements
``k8s.io/kubernetes`` and ``go.etcd.io/etcd/server/v3``, with a committed ``go.sum``);
older minors are pinned to one patch each in :data:`OLDER_RELEASES`.  An older release is
built from a module generated at build time: it requires that ``k8s.io/kubernetes`` and
replaces each staging module the release's own ``go.mod`` points at ``./staging/...`` with the
matching ``v0.Y.Z`` module (so 1.26 gets ``k8s.io/legacy-cloud-providers`` and 1.37 does not).
One etcd (the one ``lab/go.mod`` pins) serves every version.

Binaries go to ``$XDG_CACHE_HOME/crdscope/controlplane/<k8s-version>/`` and are reused until
the versions change.  Users who already have binaries can point at them instead.
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
from typing import Any
from collections.abc import Callable

from crdscope.base.errors import LabError
from crdscope.toolchain.gobuild import go_build, go_env, go_version, toolchain_for
from crdscope.base.paths import cache_dir

GO_MOD = Path(__file__).with_name("go.mod")
APISERVER_PKG = "k8s.io/kubernetes/cmd/kube-apiserver"
#: The Deployment controller Crossplane's provider runtimes need (lab/controllermanager.py).
CONTROLLER_MANAGER_PKG = "k8s.io/kubernetes/cmd/kube-controller-manager"
ETCD_PKG = "go.etcd.io/etcd/server/v3"
KUBERNETES_MODULE = "k8s.io/kubernetes"

#: Older minors, each pinned to the newest patch the Go module proxy served on 2026-12-06 (the newest
#: minor is pinned in lab/go.mod). The proxy's version list omits some releases (it lists v1.29.6 as
#: 1.29's newest and nothing of 1.26-1.28), so :func:`newest_patch` asks for each patch by name;
#: ``crdscope lab versions --newest`` says where a pin is behind.
OLDER_RELEASES = {
    "1.26": "v1.26.15",
    "1.27": "v1.27.16",
    "1.28": "v1.28.15",
    "1.29": "v1.29.15",
    "1.30": "v1.30.14",
    "1.31": "v1.31.14",
    "1.32": "v1.32.13",
    "1.33": "v1.33.13",
    "1.34": "v1.34.12",
    "1.35": "v1.35.8",
    "1.36": "v1.36.5",
}
#: Minors not released yet, each pinned to the newest pre-release tag the proxy served on 2026-12-07
#: (``lab versions --newest`` asks for later ones).  Never the lab's default: that is the newest
#: released minor (lab/go.mod) until the minor's release is pinned there.
PRERELEASES = {
    "1.38": "v1.38.0-beta.0",
}

@dataclass(frozen=True)
class ServedDefaults:
    """What a minor serves by default, where minors differ in what crdscope measures.

    The lab turns no gate on, so a minor is measured as shipped; ``lab versions`` prints these and
    ``tests/e2e/test_every_minor.py`` checks them against each built server.
    """

    #: the aggregated discovery formats ``/apis`` answers (newest first; none: the legacy walk only)
    aggregated_discovery: tuple[str, ...]
    #: the newest ``flowcontrol.apiserver.k8s.io`` version served (APF's priority levels)
    flowcontrol: str

    def notes(self) -> str:
        """One line for ``lab versions``."""
        discovery = ("aggregated discovery " + " and ".join(self.aggregated_discovery) if self.aggregated_discovery
                     else "no aggregated discovery (alpha, off: --feature-gates AggregatedDiscoveryEndpoint=true)")
        return f"{discovery}; APF flowcontrol {self.flowcontrol}"


def served_defaults(minor: str) -> ServedDefaults:
    """What ``minor`` serves by default (kubernetes-facts: aggregated discovery alpha in 1.26, beta
    v2beta1 1.27-1.29, v2 from 1.30 with v2beta1 off from 1.33; flowcontrol v1 from 1.29)."""
    key = minor_key(minor)
    if key < (1, 27):
        discovery: tuple[str, ...] = ()
    elif key < (1, 30):
        discovery = ("v2beta1",)
    elif key < (1, 33):
        discovery = ("v2", "v2beta1")
    else:
        discovery = ("v2",)
    return ServedDefaults(aggregated_discovery=discovery, flowcontrol="v1" if key >= (1, 29) else "v1beta3")


@dataclass(frozen=True)
class Versions:
    """The Kubernetes release and the etcd the lab runs with it."""

    kubernetes: str
    etcd: str

    @property
    def minor(self) -> str:
        return minor_of(self.kubernetes)


@dataclass(frozen=True)
class Binaries:
    """Paths of the two control-plane executables and where they came from."""

    apiserver: Path
    etcd: Path
    origin: str  # "flags", "KUBEBUILDER_ASSETS", "cache", "PATH", "built"
    kubernetes_version: str = ""


def minor_of(version: str) -> str:
    """``v1.26.15`` -> ``1.26`` (empty when not a version)."""
    match = re.match(r"v?(\d+)\.(\d+)", version)
    return f"{match.group(1)}.{match.group(2)}" if match else ""


def pinned_versions(go_mod: Path = GO_MOD) -> Versions:
    """The newest supported versions, as ``lab/go.mod`` pins them."""
    text = go_mod.read_text()
    k8s = re.search(r"^\s*k8s\.io/kubernetes\s+(v\S+)", text, re.M)
    etcd = re.search(r"^\s*go\.etcd\.io/etcd/server/v3\s+(v\S+)", text, re.M)
    if not k8s or not etcd:
        raise LabError(f"{go_mod} does not pin k8s.io/kubernetes and go.etcd.io/etcd/server/v3")
    return Versions(kubernetes=k8s.group(1), etcd=etcd.group(1))


def supported_minors() -> list[str]:
    """Every minor ``lab up --kubernetes`` accepts, oldest first (pre-releases included)."""
    minors = {*OLDER_RELEASES, pinned_versions().minor, *PRERELEASES}
    return sorted(minors, key=minor_key)


def released_minors() -> list[str]:
    """The supported minors that have a release, oldest first (the newest is the lab's default)."""
    return [minor for minor in supported_minors() if minor not in PRERELEASES]


def is_prerelease(version: str) -> bool:
    """``v1.38.0-beta.0`` and ``v1.38.0-rc.1`` are; ``v1.37.2`` is not."""
    return "-" in version.lstrip("v")


def versions_for(minor: str | None = None) -> Versions:
    """The pinned release of ``minor`` (``1.26``, ``v1.26``; None: the newest), or a one-line error."""
    newest = pinned_versions()
    if not minor:
        return newest
    wanted = minor_of(minor)
    if wanted == newest.minor:
        return newest
    if wanted in OLDER_RELEASES:
        return Versions(kubernetes=OLDER_RELEASES[wanted], etcd=newest.etcd)
    if wanted in PRERELEASES:
        return Versions(kubernetes=PRERELEASES[wanted], etcd=newest.etcd)
    raise LabError(f"Kubernetes {minor} is not supported by the lab (supported: {', '.join(supported_minors())})",
                   exit_code=2)


def minor_key(minor: str) -> tuple[int, ...]:
    """``1.9`` sorts before ``1.26``."""
    return tuple(int(part) for part in minor.split("."))


def _served(version: str, scratch: str, env: dict[str, str]) -> bool:
    """Whether the Go module proxy serves ``k8s.io/kubernetes@version`` (its ``.info`` only, no download)."""
    done = subprocess.run(["go", "list", "-m", f"{KUBERNETES_MODULE}@{version}"], cwd=scratch, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    return done.returncode == 0


def newest_patch(minor: str, *, after: str = "", misses: int = 3, env: dict[str, str] | None = None) -> str:
    """The newest ``v1.MINOR.PATCH`` the Go module proxy serves, asked patch by patch from ``after``'s.

    The proxy's version list is incomplete (see :data:`OLDER_RELEASES`), so each patch is asked for
    by name (``go list -m``: its ``.info`` only, no download); ``misses`` absent patches in a row end
    the search. Empty when none answered.
    """
    env = {**(env or go_env()), "GOFLAGS": "-mod=mod"}
    start = int(after.rsplit(".", 1)[1]) if after.count(".") == 2 else 0
    found, absent, patch = after, 0, start + 1 if after else 0
    with tempfile.TemporaryDirectory() as scratch:  # `go list -m` wants a module or none at all
        while absent < misses:
            version = f"v{minor}.{patch}"
            if _served(version, scratch, env):
                found, absent = version, 0
            else:
                absent += 1
            patch += 1
    return found


#: Pre-release kinds in the order Kubernetes tags them (``v1.38.0-alpha.1`` < ``-beta.0`` < ``-rc.0``).
PRERELEASE_KINDS = ("alpha", "beta", "rc")


def newest_tag(minor: str, *, after: str, env: dict[str, str] | None = None) -> str:
    """The newest tag of ``minor`` the proxy serves, ``after`` included: for a release, its newest patch
    (:func:`newest_patch`); for a pre-release, the release and its patches when served, else the
    latest pre-release (each kind from ``after``'s asked number by number, up to the first absent).

    The proxy lists no pre-release, so each tag is asked for by name: a handful of ``.info`` requests.
    """
    match = re.fullmatch(r"v\d+\.\d+\.0-(alpha|beta|rc)\.(\d+)", after)
    if match is None:
        return newest_patch(minor, after=after, env=env)
    released = newest_patch(minor, env=env)
    if released:
        return released
    env = {**(env or go_env()), "GOFLAGS": "-mod=mod"}
    found, kind, number = after, match.group(1), int(match.group(2))
    with tempfile.TemporaryDirectory() as scratch:
        for later in PRERELEASE_KINDS[PRERELEASE_KINDS.index(kind):]:
            candidate = number + 1 if later == kind else 0
            while _served(f"v{minor}.0-{later}.{candidate}", scratch, env):
                found, candidate = f"v{minor}.0-{later}.{candidate}", candidate + 1
    return found


def newest_record_path() -> Path:
    """Where ``lab versions --newest`` keeps what the proxy served (``lab versions`` shows it after)."""
    return cache_dir() / "controlplane" / "newest-tags.json"


def record_newest(minor: str, tag: str, path: Path | None = None) -> None:
    """Keep the newest tag asked for ``minor``, with when it was asked."""
    path = path or newest_record_path()
    known = read_newest(path)
    known[minor] = {"tag": tag, "checked_at": time.time()}
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".tmp{os.getpid()}")
    temporary.write_text(json.dumps(known, indent=1))
    os.replace(temporary, path)


def read_newest(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """Minor -> ``{"tag", "checked_at"}`` as last asked (empty when never)."""
    try:
        known = json.loads((path or newest_record_path()).read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in known.items() if isinstance(v, dict) and isinstance(v.get("tag"), str)} \
        if isinstance(known, dict) else {}


def build_dir(versions: Versions | None = None) -> Path:
    """The cache directory for one Kubernetes version's binaries."""
    versions = versions or pinned_versions()
    return cache_dir() / "controlplane" / versions.kubernetes


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _user_binaries(apiserver_bin: str | None, etcd_bin: str | None) -> Binaries | None:
    if apiserver_bin or etcd_bin:
        if not (apiserver_bin and etcd_bin):
            raise LabError("pass both --apiserver-bin and --etcd-bin", exit_code=2)
        apiserver, etcd = Path(apiserver_bin).expanduser(), Path(etcd_bin).expanduser()
        for path in (apiserver, etcd):
            if not _executable(path):
                raise LabError(f"{path} is not an executable file", exit_code=2)
        return Binaries(apiserver, etcd, "flags", binary_version(apiserver))
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if assets:
        apiserver, etcd = Path(assets) / "kube-apiserver", Path(assets) / "etcd"
        if _executable(apiserver) and _executable(etcd):
            return Binaries(apiserver, etcd, "KUBEBUILDER_ASSETS", binary_version(apiserver))
        raise LabError(f"KUBEBUILDER_ASSETS={assets} does not hold executable kube-apiserver and etcd", exit_code=2)
    return None


def find_binaries(
    apiserver_bin: str | None = None,
    etcd_bin: str | None = None,
    kubernetes: str | None = None,
) -> Binaries | None:
    """Binaries the user already has, in order: flags, KUBEBUILDER_ASSETS, cache, PATH.

    With an explicit ``kubernetes`` minor only the cache counts (and flags are refused):
    KUBEBUILDER_ASSETS and PATH hold whatever version they hold.
    """
    if kubernetes:
        if apiserver_bin or etcd_bin:
            raise LabError("--kubernetes picks a built version; --apiserver-bin/--etcd-bin bring their own: pass one",
                           exit_code=2)
        return cached_binaries(versions_for(kubernetes))
    found = _user_binaries(apiserver_bin, etcd_bin)
    if found:
        return found
    cached = cached_binaries()
    if cached:
        return cached
    on_path = shutil.which("kube-apiserver"), shutil.which("etcd")
    if on_path[0] and on_path[1]:
        apiserver = Path(on_path[0])
        return Binaries(apiserver, Path(on_path[1]), "PATH", binary_version(apiserver))
    return None


def cached_binaries(versions: Versions | None = None) -> Binaries | None:
    """The binaries built earlier for these versions (default: the newest), if complete."""
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


def build_record(versions: Versions) -> dict[str, Any]:
    """What ``build.json`` says of a cached build (its seconds, the Go that built it); empty when none."""
    try:
        record = json.loads((build_dir(versions) / "build.json").read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


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
    kubernetes: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Binaries:
    """Binaries from the user or the cache, else built from the Go modules."""
    found = find_binaries(apiserver_bin, etcd_bin, kubernetes)
    if found:
        return found
    if not shutil.which("go"):
        raise LabError(no_binaries_message())
    return build(kubernetes, progress=progress)


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


def staging_replaces(release_go_mod: str, version: str) -> list[tuple[str, str]]:
    """``(module, vO.Y.Z)`` for each ``=> ./staging/...`` replace in a Kubernetes release's go.mod."""
    staged = version.replace("v1.", "v0.", 1)
    names = re.findall(r"^\s*(?:replace\s+)?(k8s\.io/\S+)\s+=>\s+\./staging/", release_go_mod, re.M)
    return [(name, staged) for name in sorted(set(names))]


def write_release_module(directory: Path, version: str, env: dict[str, str]) -> Path:
    """A Go module that builds ``k8s.io/kubernetes@version``, its replaces taken from that release."""
    directory.mkdir(parents=True, exist_ok=True)
    # Asked outside ``directory``: a module written there before may need a newer Go than ``env`` runs
    # (the release's go.mod, read here, is what says which).
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(["go", "mod", "download", "-json", f"{KUBERNETES_MODULE}@{version}"],
                              cwd=scratch, env={**env, "GOFLAGS": "-mod=mod"}, capture_output=True, text=True,
                              check=False)
    try:
        release_go_mod = Path(json.loads(done.stdout)["GoMod"]).read_text()
    except (ValueError, KeyError, OSError):
        reason = (done.stderr.strip().splitlines() or ["no answer"])[-1]
        raise LabError(f"cannot fetch {KUBERNETES_MODULE}@{version} from the Go module proxy: {reason}") from None
    go_line = re.search(r"^go\s+(\S+)", release_go_mod, re.M)
    lines = [f"module crdscope.local/lab-kubernetes-{minor_of(version).replace('.', '-')}", "",
             f"go {go_line.group(1) if go_line else '1.19'}", "", f"require {KUBERNETES_MODULE} {version}", ""]
    lines += [f"replace {name} => {name} {staged}" for name, staged in staging_replaces(release_go_mod, version)]
    (directory / "go.mod").write_text("\n".join(lines) + "\n")
    return directory


def _module_for(versions: Versions, target: Path, env: dict[str, str],
                say: Callable[[str], None]) -> tuple[Path, dict[str, str]]:
    """The module that builds ``versions`` (lab/go.mod for the newest release, else one written from
    the release's own go.mod) and the environment its ``go`` line needs (said when not the machine's Go)."""
    if versions == pinned_versions():
        return GO_MOD.parent, env
    module_dir = write_release_module(target / "module", versions.kubernetes, env)
    go_line = re.search(r"^go\s+(\S+)", (module_dir / "go.mod").read_text(), re.M)
    env, why = toolchain_for(go_line.group(1) if go_line else "", env)
    if why:
        say(f"Kubernetes {versions.kubernetes} {why}")
    return module_dir, env


def build(kubernetes: str | None = None, *, progress: Callable[[str], None] | None = None) -> Binaries:
    """Build kube-apiserver (of ``kubernetes``, default the newest) and etcd into the cache.

    Takes minutes on two cores the first time; an older release reuses the newest one's
    etcd when that is built already.
    """
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    versions = versions_for(kubernetes)
    if not shutil.which("go"):
        raise LabError(f"Kubernetes {versions.kubernetes} is built from Go modules and Go is not installed "
                       "(see the README: `make system-deps`)")
    newest = pinned_versions()
    target = build_dir(versions)
    target.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    kind = " (a pre-release)" if is_prerelease(versions.kubernetes) else ""
    say(f"building kube-apiserver {versions.kubernetes}{kind} and etcd {versions.etcd} from Go modules into {target}")
    say("(downloading modules and compiling takes several minutes on a small machine)")
    module_dir, env = _module_for(versions, target, go_env(), say)
    packages = [APISERVER_PKG, ETCD_PKG] if versions == newest else [APISERVER_PKG]
    with tempfile.TemporaryDirectory(dir=target) as staging:
        figures = go_build(module_dir, packages, Path(staging), ldflags=_ldflags(versions.kubernetes, time.time()),
                           say=say, env=env)
        os.replace(Path(staging) / "kube-apiserver", target / "kube-apiserver")
        # A module path ending in /v3 names its binary after the element before it.
        etcd_built = Path(staging) / "server"
        if versions != newest:
            etcd_built = _shared_etcd(newest, Path(staging), go_env(), say)
        if etcd_built.parent == Path(staging):
            os.replace(etcd_built, target / "etcd")
        else:
            shutil.copy2(etcd_built, target / "etcd")
    seconds = time.monotonic() - started
    (target / "build.json").write_text(json.dumps({
        "kubernetes": versions.kubernetes, "etcd": versions.etcd, "seconds": round(seconds, 1),
        "modules_downloaded": figures["modules_downloaded"], "go": go_version(env), "built_at": time.time()}))
    say(f"built kube-apiserver {versions.kubernetes} and etcd {versions.etcd} in {seconds:.0f}s with {go_version(env)}")
    return Binaries(target / "kube-apiserver", target / "etcd", "built", versions.kubernetes)


def controller_manager(kubernetes: str | None = None, *, progress: Callable[[str], None] | None = None) -> Path:
    """kube-controller-manager of ``kubernetes``'s minor (default the newest), built into the cache on
    first use (minutes: most of what it compiles is shared with kube-apiserver's build).

    The lab runs it only beside Crossplane, for its Deployment controller (:mod:`lab.controllermanager`).
    """
    versions = versions_for(kubernetes)
    target = build_dir(versions)
    binary = target / "kube-controller-manager"
    if _executable(binary):
        return binary
    if not shutil.which("go"):
        raise LabError(f"kube-controller-manager {versions.kubernetes} is built from Go modules and Go is "
                       "not installed")
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    target.mkdir(parents=True, exist_ok=True)
    say(f"building kube-controller-manager {versions.kubernetes} (the Deployment controller Crossplane's "
        f"provider runtimes need) into {target}")
    module_dir, env = _module_for(versions, target, go_env(), say)
    with tempfile.TemporaryDirectory(dir=target) as staging:
        figures = go_build(module_dir, [CONTROLLER_MANAGER_PKG], Path(staging),
                           ldflags=_ldflags(versions.kubernetes, time.time()), say=say, env=env)
        os.replace(Path(staging) / "kube-controller-manager", binary)
    (target / "controller-manager.json").write_text(json.dumps({"kubernetes": versions.kubernetes, **figures,
                                                                 "go": go_version(env), "built_at": time.time()}))
    say(f"built kube-controller-manager {versions.kubernetes} in {figures['seconds']:.0f}s")
    return binary


def _shared_etcd(newest: Versions, staging: Path, env: dict[str, str], say: Callable[[str], None]) -> Path:
    """The newest version's etcd (one etcd serves every version): cached, or built alone."""
    cached = build_dir(newest) / "etcd"
    if _executable(cached):
        return cached
    say(f"building etcd {newest.etcd} (shared by every Kubernetes version)")
    go_build(GO_MOD.parent, [ETCD_PKG], staging, ldflags="-s -w", say=say, env=env)
    return staging / "server"
