"""The API server's heap profile: kept beside a benchmark's figures, read with ``go tool pprof``.

kube-apiserver serves ``/debug/pprof/heap`` to a cluster-admin (``--profiling``, on by default).
``?gc=1`` makes the Go runtime collect garbage first, so the profile's in-use figures are those of the
heap the server holds (what ``costmodel.measure`` calls memory held).  The profile is sampled (one
sample per 512 KiB allocated, scaled back up by pprof): a function's in-use bytes are an estimate,
good to a few percent at the hundreds of MiB compared here.

:func:`top` is ``go tool pprof -top -inuse_space`` (``-diff_base``: what grew between two profiles of
one server), parsed into rows; :func:`side_by_side` puts the rows of two profiles in one table.

``python -m bench heapprofile LEFT RIGHT [--left-base B] [--right-base B] [--cum] [--rows N]``: that table,
for RESULTS.md (each side is what its profile holds, or what it holds more than its base).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import httpx

from .common import BENCH_DIR, BenchError

PROFILE_PATH = "/debug/pprof/heap"
PROFILES_DIR = BENCH_DIR / "results" / "profiles"
TOP_ROWS = 20
_UNITS = {"B": 1.0, "kB": 1024.0, "MB": 1024.0**2, "GB": 1024.0**3, "TB": 1024.0**4}
#: ``go tool pprof -top`` rows: flat flat% sum% cum cum% function
_ROW = re.compile(r"^\s*(-?[\d.]+)([kMGT]?B)\s+(-?[\d.]+)%\s+(-?[\d.]+)%\s+(-?[\d.]+)([kMGT]?B)\s+(-?[\d.]+)%\s+(.+)$")
_TOTAL = re.compile(r"of (-?[\d.]+)([kMGT]?B) total")


def save(client: httpx.Client, path: Path) -> Path:
    """The server's heap profile after a forced collection, written to ``path`` (gzipped protobuf)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    answer = client.get(PROFILE_PATH, params={"gc": "1"}, timeout=300)
    if answer.status_code != 200:
        raise BenchError(f"{PROFILE_PATH} answered {answer.status_code}: is profiling off, or the user not an admin?")
    path.write_bytes(answer.content)
    return path


@dataclass(frozen=True)
class Row:
    """One function of ``pprof -top``: bytes in use allocated by it (flat) and under it (cum)."""

    function: str
    flat_bytes: float
    cum_bytes: float


@dataclass(frozen=True)
class Top:
    """The rows of one ``pprof -top`` and the profile's total in-use bytes."""

    total_bytes: float
    rows: tuple[Row, ...]


def _bytes(number: str, unit: str) -> float:
    return float(number) * _UNITS[unit]


def _pprof_top(profile: Path, *options: str) -> str:
    """The text of ``go tool pprof -top -inuse_space OPTIONS PROFILE``."""
    go = shutil.which("go")
    if go is None:
        raise BenchError("go tool pprof needs the Go toolchain on PATH")
    done = subprocess.run([go, "tool", "pprof", "-top", "-inuse_space", *options, str(profile)],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise BenchError(f"go tool pprof failed: {(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    return done.stdout


def _total(text: str) -> float:
    total = _TOTAL.search(text)
    return _bytes(total.group(1), total.group(2)) if total else 0.0


def top(profile: Path, base: Path | None = None, rows: int = TOP_ROWS, cumulative: bool = False) -> Top:
    """``go tool pprof -top -inuse_space`` of ``profile`` (less ``base`` when given), parsed.  With a base,
    pprof's "of N total" is the base's total, not what grew: the total is then the difference of the two
    profiles' own totals."""
    text = _pprof_top(profile, f"-nodecount={rows}", *(["-cum"] if cumulative else []),
                      *([f"-diff_base={base}"] if base else []))
    found = []
    for line in text.splitlines():
        match = _ROW.match(line)
        if match:
            found.append(Row(match.group(8).strip(), _bytes(match.group(1), match.group(2)),
                             _bytes(match.group(5), match.group(6))))
    if base is None:
        return Top(_total(text), tuple(found))
    total = _total(_pprof_top(profile, "-nodecount=1")) - _total(_pprof_top(base, "-nodecount=1"))
    return Top(total, tuple(found))


def short(function: str) -> str:
    """A function's name without its module path: ``k8s.io/apiserver/pkg/storage/cacher.(*watchCache).Add``
    -> ``cacher.(*watchCache).Add``."""
    return function.rsplit("/", 1)[-1]


def side_by_side(left: tuple[str, Top], right: tuple[str, Top], rows: int = TOP_ROWS, cumulative: bool = False) -> str:
    """A Markdown table: each profile's top functions by in-use bytes (allocated there, or with ``cumulative``
    under it), MiB and share of its total."""
    mib = float(1 << 20)
    (left_name, left_top), (right_name, right_top) = left, right
    lines = [f"| # | {left_name}: function | MiB | share | {right_name}: function | MiB | share |",
             "|---|---|---|---|---|---|---|"]

    def cell(found: Top, index: int) -> str:
        if index >= len(found.rows):
            return " | | "
        row = found.rows[index]
        held = row.cum_bytes if cumulative else row.flat_bytes
        share = held / found.total_bytes if found.total_bytes else 0.0
        return f"`{short(row.function)}` | {held / mib:,.0f} | {share:.0%}"

    for index in range(min(rows, max(len(left_top.rows), len(right_top.rows)))):
        lines.append(f"| {index + 1} | {cell(left_top, index)} | {cell(right_top, index)} |")
    lines.append(f"| | total in use | {left_top.total_bytes / mib:,.0f} | | total in use | "
                 f"{right_top.total_bytes / mib:,.0f} | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench heapprofile", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("left", type=Path)
    parser.add_argument("right", type=Path)
    parser.add_argument("--left-base", type=Path, default=None, help="the left column is what grew over this")
    parser.add_argument("--right-base", type=Path, default=None, help="the right column is what grew over this")
    parser.add_argument("--names", default="", help="the columns' names, comma-separated [default: the files']")
    parser.add_argument("--cum", action="store_true", help="by bytes held under each function (pprof -cum)")
    parser.add_argument("--rows", type=int, default=TOP_ROWS)
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.names.split(",")] if args.names else [args.left.name, args.right.name]
    left = top(args.left, args.left_base, args.rows, args.cum)
    right = top(args.right, args.right_base, args.rows, args.cum)
    print(side_by_side((names[0], left), (names[1], right), args.rows, cumulative=args.cum))
    return 0
