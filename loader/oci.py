"""Crossplane packages named by an OCI reference (``REGISTRY/REPO:TAG``, ``REGISTRY/REPO@sha256:...``).

What counts as a reference (:func:`parse_reference`), so that it is never taken for a relative path:
nothing exists at that path locally; the first path element is a registry host (it holds a ``.`` or a
``:`` (``host:port``), or is ``localhost``; ``.`` and ``..`` are paths); the rest is a repository;
and a tag, a digest or both end it.  ``registry.example.com/team/provider-x`` without a tag is not
one (``latest`` is never assumed: a package is pinned or it is not named).

A reference is pulled with the lab's ``crane`` (go-containerregistry's CLI, built by ``crdscope lab
build --crossplane``; never downloaded): ``crane digest`` resolves the tag, then only the layer
Crossplane annotates ``io.crossplane.xpkg: base`` is fetched (``crane blob``), or, for an image
without that annotation, its flattened files (``crane export``).  ``package.yaml`` is kept under the
XDG cache by digest (``packages/sha256-<hex>/package.yaml``): a second read resolves the tag and
pulls nothing (a ``@sha256:`` reference read before runs no crane at all).  crane reads registry
credentials from Docker's ``config.json`` itself (``auths``, credential helpers), the file
:mod:`loader.registry_auth` chooses (``--registry-config FILE``, else ``$DOCKER_CONFIG``'s or
``~/.docker``'s); its messages are cut to one line without anything that looks like a credential,
and a registry's refusal (401, 403) is one line naming the registry, its challenge and what was
offered (exit 3).  Only a loopback registry (the lab's, plain HTTP) is given ``--insecure``.

Dependencies (``spec.dependsOn`` of the package's metadata) are followed, as Crossplane's resolver
installs them: a family member's reference reads the member's CRDs and then its family package's
(``ProviderConfig`` and the like), because installing the member installs both.  A version that is
a tag or a digest is taken as it is; a semantic-version constraint (``>=v1.0.0``) is resolved to
the highest tag satisfying it (``crane ls``).  A dependency on :data:`PACKAGE_HOST` (the demo's
packages) is read from the registry of the package that names it, as the demo's ImageConfig
rewrites it.  A family package named alone holds no managed-resource CRDs (members depend on it,
not the reverse); one without any CRD is an error that says to name a member.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from crdscope.base.crossplane import is_safe_start
from crdscope.base.errors import ConfigError, CrdscopeError
from crdscope.base.paths import cache_dir

from .package import PACKAGE_HOST
from .documents import CRDDocument, Item, Source
from .registry_auth import is_loopback, redact, refusal, registry_config
from .yamldocs import package_items, package_yaml_in

#: Crossplane's layer annotation (internal/xpkg/name.go): the layer holding ``package.yaml``.
XPKG_ANNOTATION = "io.crossplane.xpkg"
XPKG_BASE = "base"
FAMILY_LABEL = "pkg.crossplane.io/provider-family"
META_GROUP = "meta.pkg.crossplane.io/"
#: Packages read for one reference at most (a dependency cycle or a runaway tree ends here).
MAX_PACKAGES = 100
CRANE_TIMEOUT_SECONDS = 600.0
INDEX_TYPES = ("application/vnd.oci.image.index.v1+json",
               "application/vnd.docker.distribution.manifest.list.v2+json")

_HOST = r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)(?::\d{1,5})?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REFERENCE = re.compile(rf"^(?P<host>{_HOST})/(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)"
                        r"(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$")
_REPOSITORY = re.compile(rf"^(?P<host>{_HOST})/(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")


# --------------------------------------------------------------------------- references


@dataclass(frozen=True)
class Reference:
    """A package reference: ``host/path`` with a tag, a digest or both."""

    host: str
    path: str
    tag: str | None = None
    digest: str | None = None

    @property
    def repository(self) -> str:
        """``host/path``."""
        return f"{self.host}/{self.path}"

    @property
    def name(self) -> str:
        """The repository's last element (``provider-aws-s3``)."""
        return self.path.rsplit("/", 1)[-1]

    def __str__(self) -> str:
        return self.repository + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")

    def pinned(self, digest: str) -> str:
        """``host/path@digest``: what is pulled once the digest is known."""
        return f"{self.repository}@{digest}"

    @property
    def loopback(self) -> bool:
        """A registry on this machine (the lab's): the only kind crane may reach over plain HTTP."""
        return is_loopback(self.host)


def parse_reference(spec: str) -> Reference | None:
    """The reference ``spec`` names, or None when it is (or may be) a path (see the module doc)."""
    if os.path.lexists(os.path.expanduser(spec)):
        return None
    match = _REFERENCE.match(spec)
    if match is None or not (match.group("tag") or match.group("digest")):
        return None
    host = match.group("host")
    if host in (".", "..") or not ("." in host or ":" in host or host == "localhost"):
        return None
    return Reference(host, match.group("path"), match.group("tag"), match.group("digest"))


# --------------------------------------------------------------------------- crane

#: Runs crane's argv; returns (exit code, stdout bytes, stderr text).  Replaced in unit tests.
Runner = Callable[[list[str], Any], tuple[int, bytes, str]]


def _run(argv: list[str], stdout: Any) -> tuple[int, bytes, str]:
    try:
        # The environment as it is (crane finds ~/.docker/config.json, or DOCKER_CONFIG's), with
        # DOCKER_CONFIG pointing at --registry-config's file when one was named.
        done = subprocess.run(argv, stdout=stdout if stdout is not None else subprocess.PIPE,
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=CRANE_TIMEOUT_SECONDS,
                              check=False, env=registry_config().environment())
    except subprocess.TimeoutExpired:
        return 1, b"", f"Error: crane did not finish in {CRANE_TIMEOUT_SECONDS:.0f}s"
    except OSError as exc:
        return 1, b"", f"Error: cannot run crane: {exc.strerror or exc}"
    return done.returncode, done.stdout or b"", done.stderr.decode("utf-8", "replace")


def crane_binary() -> Path:
    """The lab's crane, or a one-line error saying how to build it (nothing is ever downloaded)."""
    from crdscope.toolchain.crossplane import cached_binaries

    found = cached_binaries()
    if found is None:
        raise ConfigError("reading a package reference needs crane, which is not built: "
                          "run `crdscope lab build --crossplane`")
    return found.crane


def crane_error(reference: str, host: str, stderr: str, *, digest: bool = False,
                loopback: bool = False) -> CrdscopeError:
    """crane's failure as one line about ``reference`` (no credentials, no URLs' query strings); a
    registry's refusal as :func:`registry_auth.refusal` says it (exit 3)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    said = next((line for line in reversed(lines) if line.startswith("Error:")), lines[-1] if lines else "")
    said = redact(said.removeprefix("Error:").strip())
    if "MANIFEST_UNKNOWN" in said:
        return ConfigError(f"{reference}: no such {'digest' if digest else 'tag'}")
    if "NAME_UNKNOWN" in said:
        return ConfigError(f"{reference}: no such repository")
    refused = refusal(reference, host, said, loopback=loopback)
    if refused is not None:
        return refused
    for cause in ("connection refused", "no such host", "i/o timeout", "network is unreachable",
                  "connection reset by peer", "server gave HTTP response to HTTPS client", "certificate"):
        if cause in said:
            return ConfigError(f"{reference}: registry {host} is not reachable: {cause}")
    return ConfigError(f"{reference}: crane: {' '.join(said.split())[:300] or 'failed'}")


@dataclass
class Crane:
    """crane for one reference's reads (``--insecure`` only towards a loopback registry)."""

    binary: Path
    run: Runner = _run

    def call(self, reference: Reference, shown: str, *arguments: str, stdout: Any = None,
             digest: bool = False) -> bytes:
        argv = [str(self.binary), *arguments, *(["--insecure"] if reference.loopback else [])]
        code, out, err = self.run(argv, stdout)
        if code != 0:
            raise crane_error(shown, reference.host, err, digest=digest, loopback=reference.loopback)
        return out


# --------------------------------------------------------------------------- semantic versions

_SEMVER = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")
_COMPARISON = re.compile(r"(>=|<=|!=|=>|=<|>|<|=|~|\^)?\s*(v?\d[0-9A-Za-z.+-]*)")


def _version_key(text: str) -> tuple[Any, ...] | None:
    """A sortable key of a semantic version (``v1.2.3-rc.1``), or None when ``text`` is not one."""
    match = _SEMVER.match(text.strip())
    if match is None:
        return None
    major, minor, patch = (int(part or 0) for part in match.group(1, 2, 3))
    pre = match.group(4)
    if pre is None:
        return (major, minor, patch, 1, ())
    ids = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
    return (major, minor, patch, 0, ids)


def _satisfies(version: tuple[Any, ...], constraint: str) -> bool:
    """Masterminds/semver's rules, as Crossplane's resolver uses them, for the usual forms: comparisons
    (joined by ``,`` or spaces: all must hold), ``~`` and ``^``, alternatives joined by ``||``; a
    prerelease only when the constraint names one."""
    for alternative in constraint.split("||"):
        parts = _COMPARISON.findall(alternative.replace(",", " "))
        if not parts:
            raise ConfigError(f"version constraint {constraint!r}: not understood")
        if version[3] == 0 and not any(_is_prerelease(operand) for _, operand in parts):
            continue
        if all(_holds(version, operator, operand) for operator, operand in parts):
            return True
    return False


def _is_prerelease(text: str) -> bool:
    key = _version_key(text)
    return key is not None and key[3] == 0


def _holds(version: tuple[Any, ...], operator: str, operand: str) -> bool:
    bound = _version_key(operand)
    if bound is None:
        raise ConfigError(f"version constraint {operator}{operand}: {operand} is not a semantic version")
    major, minor, patch = bound[:3]
    if operator == "~":
        return bound <= version < (major, minor + 1, 0, 0, ())
    if operator == "^":
        upper = (major + 1, 0, 0, 0, ()) if major else (0, minor + 1, 0, 0, ()) if minor else (0, 0, patch + 1, 0, ())
        return bound <= version < upper
    return {">=": version >= bound, "=>": version >= bound, "<=": version <= bound, "=<": version <= bound,
            ">": version > bound, "<": version < bound, "!=": version != bound}.get(operator, version == bound)


def highest_satisfying(tags: list[str], constraint: str) -> str | None:
    """The tag of the highest version satisfying ``constraint`` (tags that are not versions ignored)."""
    keyed = [(key, tag) for tag in tags if (key := _version_key(tag)) is not None]
    matching = [(key, tag) for key, tag in keyed if _satisfies(key, constraint)]
    return max(matching)[1] if matching else None


# --------------------------------------------------------------------------- packages


@dataclass(frozen=True)
class PulledPackage:
    """One package read from a registry: what named it, its digest and its cached ``package.yaml``."""

    reference: str
    digest: str
    file: Path
    metadata: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def family(self) -> str | None:
        """The family it belongs to (``pkg.crossplane.io/provider-family``), when labelled."""
        labels = (self.metadata.get("metadata") or {}).get("labels") or {}
        return labels.get(FAMILY_LABEL) if isinstance(labels, dict) else None

    @property
    def name(self) -> str:
        """``metadata.name`` of its ``crossplane.yaml``."""
        return str((self.metadata.get("metadata") or {}).get("name") or "")

    def crd_count(self) -> int:
        """Top-level ``kind: CustomResourceDefinition`` lines (crank writes every CRD so)."""
        with open(self.file, "rb") as handle:
            return sum(1 for line in handle if line.startswith(b"kind: CustomResourceDefinition"))

    def summary(self) -> PackageSummary:
        """What the package is and holds, from its metadata and its top-level ``kind:`` lines (no parse)."""
        kinds: Counter[str] = Counter()
        with open(self.file, "rb") as handle:
            for line in handle:
                if line.startswith(b"kind: "):
                    kinds[line[6:].strip().decode("utf-8", "replace")] += 1
        capabilities = (self.metadata.get("spec") or {}).get("capabilities") or []
        return PackageSummary(self.reference, str(self.metadata.get("kind") or "package"), self.name,
                              kinds["CustomResourceDefinition"], kinds["CompositeResourceDefinition"],
                              kinds["Composition"],
                              is_safe_start(tuple(str(c) for c in capabilities if isinstance(c, str))))


@dataclass(frozen=True)
class PackageSummary:
    """One package of a reference's closure, for people and ``--json``: its kind and what it holds."""

    reference: str
    #: ``Provider``, ``Configuration`` or ``Function`` (``crossplane.yaml``'s kind)
    kind: str
    name: str
    crds: int
    xrds: int
    compositions: int
    safe_start: bool

    def describe(self) -> str:
        """``provider-x-s3 (Provider, safe-start: 12 CRDs)``, ``platform (Configuration: 1 XRD, 2 Compositions)``."""
        held = [f"{count} {noun}{'s' if count != 1 else ''}" for count, noun in
                ((self.crds, "CRD"), (self.xrds, "XRD"), (self.compositions, "Composition")) if count]
        return f"{self.name or self.reference} ({self.kind}{', safe-start' if self.safe_start else ''}: " \
               f"{', '.join(held) or 'nothing installable'})"

    def to_json(self) -> dict[str, Any]:
        return {"reference": self.reference, "kind": self.kind, "name": self.name, "crds": self.crds,
                "xrds": self.xrds, "compositions": self.compositions, "safe_start": self.safe_start}


def packages_cache() -> Path:
    """Where pulled packages' ``package.yaml`` files are kept, by digest."""
    return cache_dir() / "packages"


def cached_file(digest: str) -> Path:
    """``packages/sha256-<hex>/package.yaml``."""
    return packages_cache() / digest.replace(":", "-") / "package.yaml"


def package_metadata(path: Path) -> dict[str, Any]:
    """The package's metadata (``meta.pkg.crossplane.io`` object): crank writes it first, so only the
    first document is parsed, never the CRDs after it."""
    lines: list[bytes] = []
    with open(path, "rb") as handle:
        for line in handle:
            if line.rstrip() == b"---" or line.startswith(b"--- "):
                if any(existing.strip() for existing in lines):
                    break
                continue
            lines.append(line)
    try:
        document = yaml.safe_load(b"".join(lines).decode("utf-8-sig"))
    except (yaml.YAMLError, UnicodeDecodeError):
        return {}
    is_meta = isinstance(document, dict) and str(document.get("apiVersion", "")).startswith(META_GROUP)
    return document if is_meta else {}


def dependencies(metadata: dict[str, Any]) -> list[tuple[str, str]]:
    """(repository, version) of each ``spec.dependsOn`` entry (v2's ``package``, v1's ``provider`` &c.)."""
    found = []
    for entry in (metadata.get("spec") or {}).get("dependsOn") or []:
        if not isinstance(entry, dict):
            continue
        repository = entry.get("package") or entry.get("provider") or entry.get("configuration") \
            or entry.get("function")
        if isinstance(repository, str) and repository:
            found.append((repository, str(entry.get("version") or "")))
    return found


class Puller:
    """Resolves a reference and its dependencies to cached ``package.yaml`` files."""

    def __init__(self, crane: Crane | None = None) -> None:
        self._crane = crane

    @property
    def crane(self) -> Crane:
        if self._crane is None:
            self._crane = Crane(crane_binary())
        return self._crane

    def closure(self, root: Reference) -> list[PulledPackage]:
        """The package ``root`` names, then every package it depends on (breadth first, each once)."""
        queue: list[tuple[Reference, str]] = [(root, str(root))]
        seen: set[str] = set()
        pulled: list[PulledPackage] = []
        while queue:
            reference, shown = queue.pop(0)
            package = self.pull(reference, shown)
            if package.digest in seen:
                continue
            seen.add(package.digest)
            pulled.append(package)
            if len(pulled) > MAX_PACKAGES:
                raise ConfigError(f"{root}: more than {MAX_PACKAGES} packages in its dependencies")
            for repository, version in dependencies(package.metadata):
                queue.append(self.dependency(repository, version, reference, shown))
        return pulled

    def dependency(self, repository: str, version: str, parent: Reference, parent_shown: str) -> tuple[Reference, str]:
        """The reference a ``dependsOn`` entry resolves to (its version a digest, a tag or a constraint)."""
        match = _REPOSITORY.match(repository)
        if match is None:
            raise ConfigError(f"{parent_shown}: depends on {repository!r}, which is not a repository reference")
        host = parent.host if match.group("host") == PACKAGE_HOST else match.group("host")
        base = Reference(host, match.group("path"))
        version = version.strip()
        if _DIGEST.match(version):
            chosen = Reference(host, base.path, digest=version)
        elif _version_key(version) is not None and _TAG.match(version):
            chosen = Reference(host, base.path, tag=version)  # an exact version: the tag as written
        elif version:
            listed = self.crane.call(base, f"{base.repository} (a dependency of {parent_shown})", "ls",
                                     base.repository).decode("utf-8", "replace").split()
            tag = highest_satisfying(listed, version)
            if tag is None:
                raise ConfigError(f"{parent_shown}: depends on {base.repository} {version}, "
                                  "and no tag there satisfies it")
            chosen = Reference(host, base.path, tag=tag)
        else:
            raise ConfigError(f"{parent_shown}: depends on {repository} without a version")
        return chosen, str(chosen)

    def pull(self, reference: Reference, shown: str) -> PulledPackage:
        """One package's ``package.yaml``, from the cache when its digest was read before."""
        digest = reference.digest
        if digest is None:
            found = self.crane.call(reference, shown, "digest", str(reference)).decode().strip()
            if not _DIGEST.match(found):
                raise ConfigError(f"{shown}: crane gave no sha256 digest ({found[:80]!r})")
            digest = found
        path = cached_file(digest)
        if not path.is_file():
            self._fetch(reference, shown, digest, path)
        return PulledPackage(shown, digest, path, package_metadata(path))

    def _fetch(self, reference: Reference, shown: str, digest: str, target: Path) -> None:
        pinned = reference.pinned(digest)
        by_digest = reference.digest is not None
        manifest_raw = self.crane.call(reference, shown, "manifest", pinned, digest=by_digest)
        try:
            manifest = json.loads(manifest_raw)
        except ValueError:
            raise ConfigError(f"{shown}: the registry's manifest is not JSON") from None
        layer = None
        if manifest.get("mediaType") not in INDEX_TYPES:
            layer = next((entry.get("digest") for entry in manifest.get("layers") or []
                          if (entry.get("annotations") or {}).get(XPKG_ANNOTATION) == XPKG_BASE), None)
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=target.parent) as spool:
            if layer:
                self.crane.call(reference, shown, "blob", reference.pinned(layer), stdout=spool)
            else:  # not annotated (or an index): the image's flattened files
                self.crane.call(reference, shown, "export", pinned, "-", stdout=spool)
            spool.seek(0)
            found = package_yaml_in(spool)
        if found is None:
            raise ConfigError(f"{shown}: not a Crossplane package (no package.yaml in the image)")
        staging = target.with_name(f".{target.name}.{os.getpid()}")
        staging.write_bytes(found)
        os.replace(staging, target)  # whole or absent: a second read trusts what it finds


# --------------------------------------------------------------------------- the source


class OciSource(Source):
    """The CRDs of a Crossplane package named by an OCI reference, and of the packages it depends on."""

    def __init__(self, reference: Reference, spec: str | None = None, puller: Puller | None = None) -> None:
        super().__init__()
        self.reference = reference
        self.spec = spec or str(reference)
        self.puller = puller or Puller()
        self.packages: list[PulledPackage] = []

    def prepare(self) -> None:
        self.packages = self.puller.closure(self.reference)
        counts = [package.crd_count() for package in self.packages]
        # The line count is a cheap estimate; "no CRDs" is said only when parsing agrees.
        if not any(counts) and not any(isinstance(item, CRDDocument) for item in self.items()):
            root = self.packages[0]
            if root.family and not dependencies(root.metadata):
                raise ConfigError(f"{self.spec}: this package holds no CRDs: it is the base package of the "
                                  f"{root.family} family, which its members depend on; name a member")
            raise ConfigError(f"{self.spec}: this package holds no CRDs")
        digests = hashlib.sha256(" ".join(p.digest for p in self.packages).encode()).hexdigest()
        # "xpkg:": the key names its content (digests), so the estimator keeps its features like a file's.
        self.key = f"xpkg:oci:{self.reference.repository}@{digests}"
        self.estimate = sum(counts)

    def items(self) -> Iterator[Item]:
        for package in self.packages:
            yield from package_items(package.file.read_bytes(), package.reference)


def crd_groups(source: OciSource) -> dict[str, list[tuple[str, str]]]:
    """Package reference -> (CRD name, group) of each of its CRDs (after :meth:`OciSource.prepare`)."""
    found: dict[str, list[tuple[str, str]]] = {}
    for package in source.packages:
        rows = found.setdefault(package.reference, [])
        for item in package_items(package.file.read_bytes(), package.reference):
            if isinstance(item, CRDDocument):
                rows.append((item.name, item.group))
    return found
