"""YAML documents and Crossplane ``package.yaml`` as source items: what every CRD source parses.

Kept apart from :mod:`loader.sources` so that :mod:`loader.oci` (which :func:`sources.open_source`
opens) reads packages without importing the module that imports it.
"""

from __future__ import annotations

import lzma
import re
import tarfile
import zlib
from collections.abc import Iterable, Iterator
from typing import IO, Any

import yaml

from .documents import Item, SourceProblem, document_items

_SEPARATOR = re.compile(r"^---(?:[ \t].*)?$")


# --------------------------------------------------------------------------- YAML


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """Safe YAML as the API server reads it: timestamps stay strings (sigs.k8s.io/yaml)."""


_Loader.yaml_implicit_resolvers = {
    key: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def yaml_documents(lines: Iterable[bytes], origin: str) -> Iterator[tuple[str, Any] | SourceProblem]:
    """(``file:line``, parsed document) of a multi-document YAML text (given as byte lines), or problems.

    The text is split on ``---`` lines before parsing (as kubectl does), so a
    broken document is reported with its file and line and the documents
    after it still load.  Text that is not UTF-8 ends the file with a problem
    naming the line (there is no telling where the next document starts).
    """
    chunk: list[str] = []
    start = 1
    for number, raw in enumerate(lines, start=1):
        try:
            line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            yield SourceProblem(f"{origin}:{number}", f"not UTF-8 text ({exc.reason} at byte {exc.start} of the line)")
            return
        if _SEPARATOR.match(line.rstrip("\r\n")) and chunk:
            yield from _parse_chunk(chunk, start, origin)
            chunk, start = [], number
        chunk.append(line)
    if chunk:
        yield from _parse_chunk(chunk, start, origin)


def yaml_items(lines: Iterable[bytes], origin: str) -> Iterator[Item]:
    """The CRD items (and problems) of a multi-document YAML text: :func:`yaml_documents`, classified."""
    for found in yaml_documents(lines, origin):
        if isinstance(found, SourceProblem):
            yield found
        else:
            yield from document_items(found[1], found[0])


def _parse_chunk(chunk: list[str], start: int, origin: str) -> Iterator[tuple[str, Any] | SourceProblem]:
    # The document starts after its separator line (when it has one).
    first = start + 1 if _SEPARATOR.match(chunk[0].rstrip("\r\n")) else start
    try:
        documents = list(yaml.load_all("".join(chunk), Loader=_Loader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = start + mark.line if mark is not None else first
        problem = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        yield SourceProblem(f"{origin}:{line}", f"YAML error: {problem}")
        return
    except yaml.YAMLError as exc:
        yield SourceProblem(f"{origin}:{first}", f"YAML error: {' '.join(str(exc).split())}")
        return
    for document in documents:
        yield f"{origin}:{first}", document


# --------------------------------------------------------------------------- sources


def package_yaml_in(files: IO[bytes]) -> bytes | None:
    """``package.yaml`` at the root of a filesystem tar (a package's layer, gzipped or not, or an
    image's flattened files), or None when the tar is not one or lacks it (a config blob, another layer)."""
    try:
        with tarfile.open(fileobj=files, mode="r:*") as tar:
            entry = next((m for m in tar if m.isfile() and m.name.lstrip("./") == "package.yaml"), None)
            found = tar.extractfile(entry) if entry is not None else None
            return found.read() if found is not None else None
    except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError):
        return None


def package_items(raw: bytes, spec: str) -> Iterator[Item]:
    """The items of a package's ``package.yaml`` (its metadata document is counted as not a CRD)."""
    yield from yaml_items(raw.splitlines(keepends=True), f"{spec}:package.yaml")
