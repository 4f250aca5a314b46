"""Read a SOURCE (anything the loader reads) into CRD features, without a cluster.

``synthetic:N``, files, directories, archives, stdin, ``.xpkg`` packages and
``--from-context`` all come through :func:`crdscope.loader.sources.open_source`;
items the loader would report as problems are counted, not fatal.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crdscope.loader.oci import OciSource, PackageSummary
from crdscope.loader.sources import CRDDocument, SourceProblem, UniqueNames, open_source
from crdscope.base.paths import cache_dir

from .features import CRDFeatures, features_of


@dataclass(frozen=True)
class SourceCRDs:
    """The CRDs of a source and what could not be read."""

    spec: str
    crds: tuple[CRDFeatures, ...]
    problems: tuple[SourceProblem, ...]
    #: The Crossplane packages a reference named (the package, then its dependencies); empty otherwise
    packages: tuple[PackageSummary, ...] = ()


async def read_source(spec: str | None, *, schema_props: int = 40, seed: int = 1, from_context: str | None = None,
                      kubeconfig: str | None = None) -> SourceCRDs:
    """Every CRD of the source as features (duplicates skipped as the loader skips them)."""
    source = open_source(spec, seed=seed, schema_props=schema_props, from_context=from_context,
                         kubeconfig=kubeconfig)
    await source.aprepare()
    packages = tuple(p.summary() for p in source.packages) if isinstance(source, OciSource) else ()
    cached = _cache_path(source.key)
    if cached is not None and (found := _read_cache(cached)) is not None:
        return SourceCRDs(source.spec, found, (), packages)
    unique = UniqueNames()
    crds: list[CRDFeatures] = []
    problems: list[SourceProblem] = []
    async for item in source.aitems():
        checked = unique.check(item)
        if isinstance(checked, CRDDocument):
            crds.append(features_of(checked))
        elif checked.outcome != "not-crd":
            problems.append(checked)
    if cached is not None and not problems:
        _write_cache(cached, crds)
    return SourceCRDs(source.spec, tuple(crds), tuple(problems), packages)


#: Sources whose key names their content (a file's path, size and modification time).
CACHED_KINDS = ("file:", "archive:", "dir:", "xpkg:")
CACHE_FORMAT = 1


def _cache_path(key: str) -> Path | None:
    """Where a file source's features are kept: parsing 45 MB of YAML takes seconds, once."""
    if not key.startswith(CACHED_KINDS):
        return None
    digest = hashlib.sha256(f"{CACHE_FORMAT}:{key}".encode()).hexdigest()[:32]
    return cache_dir() / "estimate" / f"{digest}.json"


def _read_cache(path: Path) -> tuple[CRDFeatures, ...] | None:
    try:
        rows = json.loads(path.read_text())
        return tuple(_features_of_row(row) for row in rows)
    except (OSError, ValueError, TypeError):
        return None  # absent or from another version: read the source again


def _features_of_row(row: dict[str, Any]) -> CRDFeatures:
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in row.items()}
    return CRDFeatures(**fields)


def _write_cache(path: Path, crds: list[CRDFeatures]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps([dataclasses.asdict(crd) for crd in crds]))
        temporary.replace(path)
    except OSError:
        pass  # a read-only cache only costs the next run its parse
