"""Recordings: round trip, damage, newer formats, rotation, flush policy, no credentials."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from crdscope.base.errors import ConfigError
from crdscope.base.samples.health import HealthSample, Outage
from crdscope.base.samples import Sample
from crdscope.session.events import Event
from crdscope.session.recorder import (FORMAT_VERSION, ClusterInfo, Recorder, encode, part_path, prune, sample_line,
                                       sample_record)
from crdscope.session.replay import RecordingReader, read_recording
from crdscope.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ClusterInfo(server="https://127.0.0.1:6443", context="crdscope-lab", kubernetes_version="v1.37.2")


@dataclasses.dataclass(frozen=True)
class Level:
    name: str
    rejected_per_s: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class RecordingTestSample(Sample):
    probe = "recording-test"
    seconds: float = 0.0
    count: int = 0
    maybe: float | None = None
    levels: tuple[Level, ...] = ()
    by_verb: dict[str, float] = dataclasses.field(default_factory=dict)


def make_samples(n: int = 12) -> list[Sample]:
    samples: list[Sample] = []
    for i in range(n):
        if i % 3 == 2:
            samples.append(HealthSample(timestamp=1000.0 + i, rss_bytes=300 << 20, crds=10 * i, restarts=0,
                                        ready=True, failing_checks=("etcd",) if i == 5 else (),
                                        outages=(Outage(990.0, 995.5, 5.5, "refused"),),
                                        storage_objects_top={"pods": i}, mib_per_crd=2.5 + i / 10))
        else:
            samples.append(RecordingTestSample(timestamp=1000.0 + i, seconds=i / 7, count=i,
                                               maybe=None if i % 2 else 1.25, levels=(Level("global", i / 3),),
                                               by_verb={"GET": 0.1 * i}, error="boom" if i == 4 else None))
    return samples


def record(path: Path, samples: list[Sample], events: list[Event] = (), **options) -> Recorder:
    with Recorder(path, CLUSTER, **options) as recorder:
        for sample in samples:
            recorder(sample)
        for event in events:
            recorder(event)
    return recorder


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def test_round_trip_samples_and_events_equal(tmp_path):
    samples = make_samples()
    events = [Event(1003.0, "probe-down", "fail", "recording-test", "probe down: boom")]
    path = tmp_path / "session.jsonl"
    record(path, samples, events)
    recording = read_recording(path)
    assert recording.samples == samples
    assert [type(s) for s in recording.samples] == [type(s) for s in samples]
    assert recording.events == events
    assert recording.damage is None and recording.ended
    assert recording.cluster == CLUSTER


def test_a_sample_line_decodes_to_the_record_of_the_dict_path(tmp_path):
    # NaN and infinities (null), a tuple of dataclasses, a dict, non-ASCII text and an exponent float.
    sample = RecordingTestSample(timestamp=1000.5, seconds=math.nan, count=3, maybe=1e-05,
                                 levels=(Level("global", math.inf), Level("wörkload-high", 2.5e20)),
                                 by_verb={"GET": -math.inf, "LIST": 0.25}, error="délai dépassé")
    dict_path = encode(sample_record(sample))
    path = tmp_path / "session.jsonl"
    record(path, [sample])
    recorded = lines(path)[1]
    assert recorded == sample_line(sample) and recorded.endswith(b"}\n") and recorded.count(b"\n") == 1
    assert json.loads(recorded) == json.loads(dict_path)
    assert json.loads(recorded) == {
        "type": "sample", "probe": "recording-test",
        "data": {"timestamp": 1000.5, "error": "délai dépassé", "seconds": None, "count": 3, "maybe": 1e-05,
                 "levels": [{"name": "global", "rejected_per_s": None},
                            {"name": "wörkload-high", "rejected_per_s": 2.5e20}],
                 "by_verb": {"GET": None, "LIST": 0.25}}}


def test_header_names_cluster_and_versions(tmp_path):
    path = tmp_path / "session.jsonl"
    record(path, make_samples(2))
    header = json.loads(lines(path)[0])
    assert header["type"] == "header" and header["format"] == "crdscope-recording"
    assert header["format_version"] == FORMAT_VERSION
    assert header["crdscope_version"]
    assert header["cluster"] == {"server": "https://127.0.0.1:6443", "context": "crdscope-lab",
                                 "kubernetes_version": "v1.37.2"}
    assert json.loads(lines(path)[-1])["type"] == "end"


def test_a_password_in_the_server_address_is_never_written(tmp_path):
    path = tmp_path / "session.jsonl"
    with Recorder(path, ClusterInfo(server="https://admin:s3cr3t-pass@10.0.0.1:6443", context="c")) as recorder:
        recorder(make_samples(1)[0])
    text = path.read_text()
    assert "s3cr3t-pass" not in text and "admin:" not in text
    assert read_recording(path).cluster.server == "https://10.0.0.1:6443"


def test_a_truncated_file_replays_up_to_the_torn_line(tmp_path):
    samples = make_samples()
    path = tmp_path / "session.jsonl"
    record(path, samples)
    content = lines(path)
    # Keep the header and the first 7 samples whole, then half of the 8th line (no end record).
    kept = content[:8]
    torn = content[8][: len(content[8]) // 2]
    path.write_bytes(b"".join(kept) + torn)
    recording = read_recording(path)
    assert recording.samples == samples[:7]
    assert recording.damage is not None and not recording.ended
    assert recording.damage.line == 9
    assert recording.damage.byte == sum(len(line) for line in kept)
    assert "cut short" in recording.damage.reason
    assert f"line 9 (byte {recording.damage.byte})" in recording.damage.message()


def test_a_file_cut_between_lines_replays_everything_without_damage(tmp_path):
    samples = make_samples()
    path = tmp_path / "session.jsonl"
    record(path, samples)
    path.write_bytes(b"".join(lines(path)[:-1]))  # killed before the end record
    recording = read_recording(path)
    assert recording.samples == samples and recording.damage is None and not recording.ended


@pytest.mark.parametrize("garbage, reason", [
    (b'{"type":"sample","probe":"health","data":{"timestamp": 1\n', "not valid JSON"),
    (b"\xff\xfe\x00garbage\n", "not UTF-8"),
    (b'["a list"]\n', "not a record"),
    (b'{"type":"sample","probe":"recording-test","data":{"levels":[{"nom":"x"}]}}\n', "does not rebuild"),
    (b"\n", "empty line"),
])
def test_a_corrupt_line_stops_the_replay_there(tmp_path, garbage, reason):
    samples = make_samples()
    path = tmp_path / "session.jsonl"
    record(path, samples)
    content = lines(path)
    content[5] = garbage  # the 5th sample's line (line 6 of the file)
    path.write_bytes(b"".join(content))
    recording = read_recording(path)
    assert recording.samples == samples[:4]
    assert recording.damage.line == 6
    assert recording.damage.byte == sum(len(line) for line in content[:5])
    assert reason in recording.damage.reason


def test_a_newer_format_is_refused_with_a_clear_message(tmp_path):
    path = tmp_path / "future.jsonl"
    record(path, make_samples(3))
    content = lines(path)
    header = json.loads(content[0])
    header.update(format_version=FORMAT_VERSION + 1, crdscope_version="9.0.0")
    content[0] = json.dumps(header).encode() + b"\n"
    path.write_bytes(b"".join(content))
    with pytest.raises(ConfigError) as caught:
        read_recording(path)
    message = str(caught.value)
    assert f"format version {FORMAT_VERSION + 1}" in message and "9.0.0" in message and "upgrade" in message
    result = CliRunner().invoke(cli, ["replay", "--headless", str(path)])
    assert result.exit_code == 2 and "upgrade crdscope" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(cli, ["report", str(path)])
    assert result.exit_code == 2


@pytest.mark.parametrize("content", [b"", b"hello\n", b'{"type":"sample"}\n'])
def test_not_a_recording(tmp_path, content):
    path = tmp_path / "other.jsonl"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match="not a crdscope recording"):
        read_recording(path)


def test_missing_file_is_one_line(tmp_path):
    result = CliRunner().invoke(cli, ["report", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_rotation_splits_into_parts_that_replay_as_one(tmp_path):
    samples = make_samples(60)
    path = tmp_path / "long.jsonl"
    cap = 4096
    recorder = record(path, samples, max_file_bytes=cap)
    assert len(recorder.paths) >= 3
    assert recorder.paths[0] == path and recorder.paths[1] == part_path(path, 2) == tmp_path / "long.part2.jsonl"
    headers = [json.loads(lines(p)[0]) for p in recorder.paths]
    assert [h["part"] for h in headers] == list(range(1, len(recorder.paths) + 1))
    assert len({h["session_id"] for h in headers}) == 1
    for part in recorder.paths:
        assert part.stat().st_size <= cap
    recording = read_recording(path)
    assert recording.samples == samples and recording.ended and recording.parts == recorder.paths


def test_a_missing_part_is_damage(tmp_path):
    path = tmp_path / "long.jsonl"
    recorder = record(path, make_samples(60), max_file_bytes=4096)
    recorder.paths[1].unlink()
    recording = read_recording(path)
    assert recording.damage is not None and "missing" in recording.damage.reason
    assert 0 < len(recording.samples) < 60


def test_prune_keeps_the_newest_recordings_under_the_cap(tmp_path):
    for i in range(5):
        file = tmp_path / f"r{i}.jsonl"
        file.write_bytes(b"x" * 1000)
        os.utime(file, (1000 + i, 1000 + i))
    (tmp_path / "notes.txt").write_bytes(b"y" * 5000)
    current = tmp_path / "r0.jsonl"  # the oldest, but being written: never deleted
    deleted = prune(tmp_path, 2500, keep={current})
    assert sorted(p.name for p in deleted) == ["r1.jsonl", "r2.jsonl", "r3.jsonl"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "r0.jsonl", "r4.jsonl"]


def test_the_recorder_prunes_its_directory_when_asked(tmp_path):
    old = tmp_path / "old.jsonl"
    old.write_bytes(b"x" * 10_000)
    os.utime(old, (1, 1))
    record(tmp_path / "new.jsonl", make_samples(3), keep_bytes=5_000)
    assert not old.exists() and (tmp_path / "new.jsonl").exists()


def test_every_record_is_readable_at_once_and_a_kill_loses_nothing(tmp_path):
    """Each record reaches the kernel when it is written: another reader sees it, and SIGKILL keeps it."""
    path = tmp_path / "killed.jsonl"
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        from crdscope.probes.health import HealthSample
        from crdscope.session.recorder import ClusterInfo, Recorder
        recorder = Recorder({str(path)!r}, ClusterInfo(server="https://x:1"))
        for i in range(25):
            recorder(HealthSample(timestamp=float(i), crds=i))
        print(len(open({str(path)!r}, "rb").read().splitlines()), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == -9
    assert done.stdout.strip() == "26"  # header + 25 samples, read back before the kill
    recording = read_recording(path)
    assert [s.crds for s in recording.samples] == list(range(25))
    assert recording.damage is None and not recording.ended


def test_records_are_fsynced_within_a_second_without_closing(tmp_path):
    from tests.helpers import wait_for

    recorder = Recorder(tmp_path / "synced.jsonl", CLUSTER, fsync_interval=0.5)
    try:
        recorder(make_samples(1)[0])
        assert not recorder.synced
        wait_for(lambda: recorder.synced, timeout=5, message="the background fsync")
    finally:
        recorder.close()


def test_the_reader_streams_and_reports_parts(tmp_path):
    path = tmp_path / "s.jsonl"
    record(path, make_samples(5))
    reader = RecordingReader(path)
    assert reader.header["part"] == 1
    assert len(list(reader)) == 5 and reader.ended and reader.parts == [path]


def test_recording_is_refused_where_it_cannot_be_written(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="cannot record to"):
        Recorder(blocker / "sub" / "x.jsonl", CLUSTER)


def test_replay_json_prints_the_recorded_samples(tmp_path):
    from crdscope.probes.registry import sample_type

    samples = make_samples()
    path = tmp_path / "session.jsonl"
    record(path, samples)
    result = CliRunner().invoke(cli, ["replay", "--json", str(path)])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.output.splitlines()]
    replayed = [sample_type(r["probe"]).from_json(r["data"]) for r in records if r["type"] == "sample"]
    assert replayed == samples
    assert [r["data"]["kind"] for r in records if r["type"] == "event"] == ["probe-down", "probe-recovered"]
