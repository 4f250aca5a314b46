"""A session over the recordings' size budget deletes older sessions, never its own earlier parts."""

from __future__ import annotations

import os

from crdscope.base.samples.version import VersionSample
from crdscope.session.recorder import ClusterInfo, Recorder
from crdscope.session.replay import read_recording

CLUSTER = ClusterInfo(server="https://127.0.0.1:6443", context="crdscope-lab", kubernetes_version="v1.37.2")


def test_a_session_over_the_budget_keeps_all_its_parts(tmp_path):
    older = tmp_path / "older.jsonl"
    older.write_bytes(b"x" * 3000)
    os.utime(older, (1, 1))
    samples = [VersionSample(timestamp=1000.0 + i, server=CLUSTER.server, git_version=f"v1.37.{i}",
                             seconds=i / 100) for i in range(80)]
    path = tmp_path / "long.jsonl"
    # Parts of about 2 KB, a budget of 3 KB: from the second part on the directory is over it.
    with Recorder(path, CLUSTER, max_file_bytes=2048, keep_bytes=3000) as recorder:
        for sample in samples:
            recorder(sample)
    assert len(recorder.paths) >= 3
    assert not older.exists()  # an older session goes first
    assert all(part.exists() for part in recorder.paths)
    recording = read_recording(path)
    assert recording.damage is None and recording.samples == samples
