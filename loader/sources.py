"""Where CRDs come from: files, directories, archives, stdin and another cluster.

A source yields, in a deterministic order, :class:`CRDDocument` items (ready
to apply) and :class:`SourceProblem` items (bad input, reported per item so
that the rest of the set still loads).  Parsing is blocking work: the engine
pulls items through a worker thread (:meth:`Source.aitems`), one at a time,
so a 100 MB archive is streamed and never held parsed in memory at once.

``synthetic:N`` lives in :mod:`loader.synthetic`; :func:`open_source` turns
what the user typed into a source.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import lzma
import os
import sys
import tarfile
import tempfile
import zlib
from pathlib import Path
from typing import Any, BinaryIO
from collections.abc import AsyncIterator, Iterator


from crdscope.base.errors import ClusterError, ConfigError

from .yamldocs import package_items, package_yaml_in, yaml_items
from .documents import (
    CRD_API_VERSION, CRD_GROUP, CRD_KIND, CRDDocument, Item, Source, SourceProblem, UniqueNames, document_items,
)

#: Re-exported: callers name the sources module for all of a source's parts.
__all__ = ["CRD_API_VERSION", "CRD_GROUP", "CRD_KIND", "CRDDocument", "Item", "Source", "SourceProblem",
           "UniqueNames", "document_items", "yaml_items", "open_source", "ContextSource", "ArchiveSource",
           "DirectorySource", "StdinSource", "XpkgSource", "YamlFileSource"]

YAML_SUFFIXES = (".yaml", ".yml", ".json")
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2")


def _file_identity(path: Path) -> str:
    stat = path.stat()
    return f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"


class YamlFileSource(Source):
    """One (multi-document) YAML or JSON file."""

    def __init__(self, path: Path, spec: str | None = None) -> None:
        super().__init__()
        self.path = path
        self.spec = spec or str(path)

    def prepare(self) -> None:
        self.key = "file:" + _file_identity(self.path)
        with open(self.path, "rb") as handle:
            self.estimate = _count_crd_kinds(handle)

    def items(self) -> Iterator[Item]:
        with open(self.path, "rb") as handle:
            yield from yaml_items(handle, self.spec)


def _count_crd_kinds(handle: BinaryIO) -> int:
    """Top-level ``kind: CustomResourceDefinition`` lines: the estimate of a YAML stream."""
    return sum(1 for line in handle if line.startswith(b"kind: CustomResourceDefinition"))


class StdinSource(Source):
    """Multi-document YAML from standard input, spooled first so that a restart is recognised."""

    spec = "-"

    def __init__(self, stream: BinaryIO | None = None) -> None:
        super().__init__()
        self.stream = stream
        self._spool: Any = None

    def prepare(self) -> None:
        stream = self.stream or sys.stdin.buffer
        digest = hashlib.sha256()
        self._spool = tempfile.TemporaryFile()  # noqa: SIM115 - read again by items(), closed there
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
            self._spool.write(block)
        self.key = "stdin:" + digest.hexdigest()
        self._spool.seek(0)
        self.estimate = _count_crd_kinds(self._spool)

    def items(self) -> Iterator[Item]:
        self._spool.seek(0)
        try:
            yield from yaml_items(self._spool, "stdin")
        finally:
            self._spool.close()


class DirectorySource(Source):
    """Every ``.yaml``/``.yml``/``.json`` file under a directory, recursively, sorted by path."""

    def __init__(self, path: Path, spec: str | None = None) -> None:
        super().__init__()
        self.path = path
        self.spec = spec or str(path)
        self._files: list[Path] = []

    def prepare(self) -> None:
        self._files = sorted(
            p for p in self.path.rglob("*")
            if p.is_file() and p.name.lower().endswith(YAML_SUFFIXES)
            and not any(part.startswith(".") for part in p.relative_to(self.path).parts)
        )
        digest = hashlib.sha256(str(self.path.resolve()).encode())
        for path in self._files:
            stat = path.stat()
            digest.update(f"{path.relative_to(self.path)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
        self.key = "dir:" + digest.hexdigest()
        self.estimate = len(self._files)

    def items(self) -> Iterator[Item]:
        for path in self._files:
            shown = str(Path(self.spec) / path.relative_to(self.path))
            try:
                with open(path, "rb") as handle:
                    yield from yaml_items(handle, shown)
            except OSError as exc:
                yield SourceProblem(shown, f"cannot read: {exc.strerror or exc}")


class ArchiveSource(Source):
    """A ``.tar``, ``.tar.gz`` or ``.tar.xz`` of CRD files, read as a stream in archive order.

    A damaged member is reported and skipped: unreadable bytes between members
    (a corrupt header) are detected by offset, and the members after them load.
    """

    def __init__(self, path: Path, spec: str | None = None) -> None:
        super().__init__()
        self.path = path
        self.spec = spec or str(path)

    def prepare(self) -> None:
        self.key = "archive:" + _file_identity(self.path)
        count = 0
        try:
            for member in self._members():
                count += member is not None and member[0].name.lower().endswith(YAML_SUFFIXES)
        except UnreadableError:
            pass  # reported by items()
        self.estimate = count

    def _members(self) -> Iterator[tuple[tarfile.TarInfo, Any] | None]:
        """(member, tar) for each file member, None where unreadable bytes were skipped."""
        try:
            tar = tarfile.open(self.path, "r:*", ignore_zeros=True)  # noqa: SIM115 - closed by the `with tar` below
        except (tarfile.TarError, OSError, EOFError, lzma.LZMAError, zlib.error) as exc:
            raise UnreadableError(f"not a readable tar archive: {_one_line(exc)}") from None
        expected = 0
        resyncs = 0
        with tar:
            while True:
                try:
                    member = tar.next()
                except tarfile.ReadError as exc:
                    # A bad header after an extended (pax/GNU) header: tarfile gives up even with
                    # ignore_zeros; step over one block and let it look for the next good header.
                    resyncs += 1
                    if resyncs > 1_000_000 or "unexpected end of data" in str(exc):
                        raise UnreadableError(f"archive damaged after byte {expected}: {_one_line(exc)}") from None
                    tar.offset += tarfile.BLOCKSIZE
                    continue
                except (tarfile.TarError, OSError, EOFError, lzma.LZMAError, zlib.error) as exc:
                    raise UnreadableError(f"archive damaged after byte {expected}: {_one_line(exc)}") from None
                if member is None:
                    return
                if member.offset > expected:
                    yield None  # ignore_zeros skipped a block that was not a valid header
                expected = member.offset_data + _padded(member.size) if member.isfile() else member.offset_data
                if member.isfile():
                    yield member, tar

    def items(self) -> Iterator[Item]:
        name = self.spec
        gap = False  # unreadable bytes were skipped since the last good member
        try:
            for entry in self._members():
                if entry is None:
                    gap = True
                    continue
                member, tar = entry
                origin = f"{name}:{member.name}"
                if gap:
                    yield SourceProblem(f"{name} before {member.name}",
                                        "unreadable archive data (a corrupt member header) was skipped")
                    gap = False
                if not member.name.lower().endswith(YAML_SUFFIXES):
                    continue
                try:
                    raw = tar.extractfile(member).read()
                except (tarfile.TarError, OSError, EOFError, lzma.LZMAError, zlib.error) as exc:
                    yield SourceProblem(origin, f"archive member unreadable: {_one_line(exc)}")
                    return
                try:
                    raw.decode("utf-8-sig")
                except UnicodeDecodeError as exc:
                    yield SourceProblem(origin, f"not UTF-8 text ({exc.reason} at byte {exc.start}): a corrupt member?")
                    continue
                yield from yaml_items(raw.splitlines(keepends=True), origin)
        except UnreadableError as exc:
            yield SourceProblem(name, str(exc))
            return
        if gap:
            yield SourceProblem(f"{name} (end)", "unreadable archive data (a corrupt member header) was skipped")


class UnreadableError(Exception):
    pass


def _padded(size: int) -> int:
    return (size + tarfile.BLOCKSIZE - 1) // tarfile.BLOCKSIZE * tarfile.BLOCKSIZE


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


class XpkgSource(Source):
    """A Crossplane package (``.xpkg``): an OCI image tarball whose package layer holds
    ``package.yaml`` (the package's metadata and its CRDs, one YAML stream)."""

    def __init__(self, path: Path, spec: str | None = None) -> None:
        super().__init__()
        self.path = path
        self.spec = spec or str(path)

    def prepare(self) -> None:
        self.key = "xpkg:" + _file_identity(self.path)
        self.estimate = None

    def package_yaml(self) -> bytes:
        """``package.yaml`` from whichever layer holds it (each layer is a tar, gzipped or not)."""
        try:
            with tarfile.open(self.path, "r:*") as image:
                for member in image:
                    layer = image.extractfile(member) if member.isfile() else None
                    if layer is None or member.name.endswith(".json"):
                        continue
                    found = package_yaml_in(layer)
                    if found is not None:
                        return found
        except (tarfile.TarError, OSError, EOFError, lzma.LZMAError, zlib.error) as exc:
            raise UnreadableError(f"not a readable Crossplane package: {_one_line(exc)}") from None
        raise UnreadableError("not a Crossplane package: no layer holds package.yaml")

    def items(self) -> Iterator[Item]:
        try:
            raw = self.package_yaml()
        except UnreadableError as exc:
            yield SourceProblem(self.spec, str(exc))
            return
        yield from package_items(raw, self.spec)




# --------------------------------------------------------------------------- another cluster


class ContextSource(Source):
    """The CRDs of another kubeconfig context, exported page by page to replay them here."""

    PAGE = 50

    def __init__(self, context: str, kubeconfig: str | None = None) -> None:
        super().__init__()
        self.context = context
        self.kubeconfig = kubeconfig
        self.spec = f"context:{context}"

    def prepare(self) -> None:
        # The connection stack (httpx, TLS) only for this source: files and synthetic sets need none of it.
        from crdscope.connection.kubeconfig import load_config

        self._config = load_config(self.kubeconfig, self.context)
        self.key = f"context:{self.context}@{self._config.server}"

    async def aitems(self) -> AsyncIterator[Item]:
        from crdscope.connection.cluster import Cluster, explain, raise_for_status
        from crdscope.connection.crdwatch import CRD_PATH
        from crdscope.connection.transport import TRANSPORT_ERRORS

        async with Cluster(self._config) as cluster:
            token: str | None = None
            while True:
                params: dict[str, Any] = {"limit": self.PAGE}
                if token:
                    params["continue"] = token
                try:
                    response = await cluster.client.get(CRD_PATH, params=params)
                    raise_for_status(response)
                except TRANSPORT_ERRORS as exc:
                    reason = explain(exc, cluster.server)
                    raise ClusterError(f"export from context '{self.context}': {reason}") from None
                except ClusterError as exc:
                    raise ClusterError(f"export from context '{self.context}': {exc}") from None
                page_items, token, remaining = await asyncio.to_thread(_export_page, response.content, self.context)
                if self.estimate is None:
                    self.estimate = len(page_items) + (remaining or 0)
                for item in page_items:
                    yield item
                if not token:
                    return


def _export_page(raw: bytes, context: str) -> tuple[list[Item], str | None, int | None]:
    page = json.loads(raw)
    meta = page.get("metadata") or {}
    items: list[Item] = []
    for obj in page.get("items") or []:
        obj = {"apiVersion": CRD_API_VERSION, "kind": CRD_KIND, "metadata": obj.get("metadata") or {},
               "spec": obj.get("spec")}
        items.extend(document_items(obj, f"context:{context}"))
    return items, meta.get("continue") or None, meta.get("remainingItemCount")


# --------------------------------------------------------------------------- choosing a source


def open_source(spec: str | None, *, seed: int = 1, schema_props: int = 40,
                from_context: str | None = None, kubeconfig: str | None = None,
                stdin: BinaryIO | None = None) -> Source:
    """The source named by what the user typed (``synthetic:N``, ``-``, a path, a ``.xpkg``, a package
    reference ``REGISTRY/REPO:TAG`` (see :mod:`loader.oci`)) or ``--from-context``."""
    if from_context:
        if spec:
            raise ConfigError("give either SOURCE or --from-context, not both")
        return ContextSource(from_context, kubeconfig)
    if not spec:
        raise ConfigError("no source given (a directory, an archive, a YAML file, '-' or synthetic:N)")
    from .synthetic import SyntheticSource, is_synthetic

    if is_synthetic(spec):
        return SyntheticSource.parse(spec, seed=seed, schema_props=schema_props)
    if spec == "-":
        return StdinSource(stdin)
    from .oci import OciSource, parse_reference  # deferred: it builds on this module

    reference = parse_reference(spec)  # REGISTRY/REPO:TAG or @sha256:..., never a path that exists
    if reference is not None:
        return OciSource(reference, spec)
    path = Path(os.path.expanduser(spec))
    if path.is_dir():
        return DirectorySource(path, spec)
    if not path.exists():
        raise ConfigError(f"{spec}: no such file or directory (or use synthetic:N, or a package reference "
                          "REGISTRY/REPO:TAG)")
    if not path.is_file():
        raise ConfigError(f"{spec}: not a regular file")
    if not os.access(path, os.R_OK):
        raise ConfigError(f"{spec}: permission denied")
    if path.name.lower().endswith(".xpkg"):
        return XpkgSource(path, spec)
    if path.name.lower().endswith(ARCHIVE_SUFFIXES):
        return ArchiveSource(path, spec)
    return YamlFileSource(path, spec)
