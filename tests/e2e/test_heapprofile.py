"""``bench/heapprofile.py`` against a real kube-apiserver: its heap profile kept and read with ``go tool pprof``.

The activation path's calibration (``python -m bench calibrate --activation --heap-profiles``) and the 1.27
against 1.28 comparison (``python -m bench versions --heap-profiles``) keep these profiles; RESULTS names
what holds the difference from the tables :func:`bench.heapprofile.side_by_side` prints.  Seconds on the
session's lab.
"""

from __future__ import annotations

import shutil

import httpx
import pytest

pytestmark = [pytest.mark.lab]


def _client(lab) -> httpx.Client:
    from crdscope.lab.controlplane import admin_tls

    return httpx.Client(base_url=lab.server, verify=admin_tls(lab.state.pki_dir), timeout=120)


def test_a_kept_heap_profile_reads_as_its_top_functions(lab, tmp_path):
    if shutil.which("go") is None:
        pytest.skip("go tool pprof needs the Go toolchain on PATH")
    from bench.heapprofile import save, side_by_side, top

    with _client(lab) as client:
        first = save(client, tmp_path / "first.pb.gz")
        second = save(client, tmp_path / "second.pb.gz")
    assert first.read_bytes()[:2] == b"\x1f\x8b"  # gzipped protobuf, as the server sends it
    held = top(first, rows=5)
    # An API server holds tens of MiB in use; the five top functions are named and hold part of it.
    assert held.total_bytes > 10 * 2**20
    assert len(held.rows) == 5 and all(row.function for row in held.rows)
    assert 0 < sum(row.flat_bytes for row in held.rows) <= held.total_bytes
    assert all(row.cum_bytes >= row.flat_bytes for row in held.rows)
    # Against itself as its base, nothing grew; against another, what grew is the difference of their totals
    # (pprof's own "of N total" under -diff_base is the base's: the first version of top() printed that).
    assert top(first, base=first, rows=5).total_bytes == 0
    later = top(second, rows=5)
    assert top(second, base=first, rows=5).total_bytes == pytest.approx(later.total_bytes - held.total_bytes)
    table = side_by_side(("first", held), ("second", later), rows=5).splitlines()
    assert len(table) == 2 + 5 + 1 and table[-1].startswith("| | total in use |")


def test_a_client_the_server_will_not_profile_for_is_one_error(lab, tmp_path):
    import ssl

    from bench.common import BenchError
    from bench.heapprofile import save

    # The lab's CA but no client certificate: anonymous, which the server refuses the profile.
    anonymous = ssl.create_default_context(cafile=str(lab.state.pki_dir / "ca.crt"))
    with (httpx.Client(base_url=lab.server, verify=anonymous, timeout=60) as client,
          pytest.raises(BenchError, match=r"^/debug/pprof/heap answered 40[13]: is profiling off")):
        save(client, tmp_path / "refused.pb.gz")
    assert not (tmp_path / "refused.pb.gz").exists()
