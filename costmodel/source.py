"""Read a SOURCE (anything the loader reads) into CRD features, without a cluster.

``synthetic:N``, files, directories, archives, stdin, ``.xpkg`` packages and
``--from-context`` all come through :func:`crdscope.loader.sources.open_source`;
items the loader would report as problems are counted, not fatal.
"""

from __future__ import annotations

from dataclasses import dataclass

from crdscope.loader.sources import CRDDocument, SourceProblem, UniqueNames, open_source

from .features import CRDFeatures, features_of


@dataclass(frozen=True)
class SourceCRDs:
    """The CRDs of a source and what could not be read."""

    spec: str
    crds: tuple[CRDFeatures, ...]
    problems: tuple[SourceProblem, ...]


async def read_source(spec: str | None, *, schema_props: int = 40, seed: int = 1, from_context: str | None = None,
                      kubeconfig: str | None = None) -> SourceCRDs:
    """Every CRD of the source as features (duplicates skipped as the loader skips them)."""
    source = open_source(spec, seed=seed, schema_props=schema_props, from_context=from_context,
                         kubeconfig=kubeconfig)
    await source.aprepare()
    unique = UniqueNames()
    crds: list[CRDFeatures] = []
    problems: list[SourceProblem] = []
    async for item in source.aitems():
        checked = unique.check(item)
        if isinstance(checked, CRDDocument):
            crds.append(features_of(checked))
        elif checked.outcome != "not-crd":
            problems.append(checked)
    return SourceCRDs(source.spec, tuple(crds), tuple(problems))
