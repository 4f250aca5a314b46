"""Every Kubernetes object a source holds, not only its CRDs: what a platform is made of.

``crdscope mrap --from SOURCE`` reads a platform from files: a directory of XRDs, Compositions and
MRAPs (and ``.xpkg`` packages beside them), one YAML file, one ``.xpkg``, or a package reference
(``REGISTRY/REPO:TAG``: a Configuration pulled with the Providers it depends on).  A package's
metadata document (``meta.pkg.crossplane.io``) comes with the objects, so the reader knows which
provider declared ``safe-start``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crdscope.base.errors import ConfigError

from .documents import SourceProblem
from .sources import YAML_SUFFIXES, XpkgSource, UnreadableError
from .yamldocs import yaml_documents

XPKG_SUFFIX = ".xpkg"


@dataclass(frozen=True)
class SourceObject:
    """One object and where it was read (``file:line``, ``package:package.yaml:line``)."""

    origin: str
    body: dict[str, Any] = field(repr=False)
    #: The package it came in ("" for a plain file).
    package: str = ""

    @property
    def kind(self) -> str:
        return str(self.body.get("kind") or "")

    @property
    def api_version(self) -> str:
        return str(self.body.get("apiVersion") or "")


@dataclass
class SourceObjects:
    """What :func:`read_objects` found, and what it could not read."""

    objects: list[SourceObject] = field(default_factory=list)
    problems: list[SourceProblem] = field(default_factory=list)

    def add(self, found: Iterator[tuple[str, Any] | SourceProblem], package: str = "") -> None:
        for item in found:
            if isinstance(item, SourceProblem):
                self.problems.append(item)
            elif isinstance(item[1], dict):
                body = item[1]
                if str(body.get("kind", "")).endswith("List") and isinstance(body.get("items"), list):
                    self.objects.extend(SourceObject(f"{item[0]}[{i}]", o, package)
                                        for i, o in enumerate(body["items"]) if isinstance(o, dict))
                else:
                    self.objects.append(SourceObject(item[0], body, package))


def _package(path: Path, shown: str, into: SourceObjects) -> None:
    source = XpkgSource(path, shown)
    try:
        raw = source.package_yaml()
    except UnreadableError as exc:
        into.problems.append(SourceProblem(shown, str(exc)))
        return
    into.add(yaml_documents(raw.splitlines(keepends=True), f"{shown}:package.yaml"), package=shown)


def read_objects(spec: str) -> SourceObjects:
    """Every object of SOURCE (a directory, a YAML file, a ``.xpkg`` or a package reference)."""
    from .oci import Puller, parse_reference  # deferred: crane is looked up only for a reference

    found = SourceObjects()
    reference = parse_reference(spec)
    if reference is not None:
        for package in Puller().closure(reference):
            with open(package.file, "rb") as handle:
                found.add(yaml_documents(handle, f"{package.reference}:package.yaml"), package=package.reference)
        return found
    path = Path(os.path.expanduser(spec))
    if not path.exists():
        raise ConfigError(f"{spec}: no such file or directory (or a package reference REGISTRY/REPO:TAG)")
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file()
                       and p.name.lower().endswith((*YAML_SUFFIXES, XPKG_SUFFIX))
                       and not any(part.startswith(".") for part in p.relative_to(path).parts))
        if not files:
            raise ConfigError(f"{spec}: no .yaml, .yml, .json or .xpkg file in this directory")
    else:
        files = [path]
    for file in files:
        shown = str(Path(spec) / file.relative_to(path)) if path.is_dir() else spec
        if file.name.lower().endswith(XPKG_SUFFIX):
            _package(file, shown, found)
            continue
        try:
            with open(file, "rb") as handle:
                found.add(yaml_documents(handle, shown))
        except OSError as exc:
            found.problems.append(SourceProblem(shown, f"cannot read: {exc.strerror or exc}"))
    return found
