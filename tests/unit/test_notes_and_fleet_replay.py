"""A narrator's notes in a recording, and several recordings replayed on one clock (issue 48 item 5)."""

from __future__ import annotations

import asyncio
import json

import pytest

from crdscope.base.samples.health import HealthSample
from crdscope.session.fleet_replay import FleetReplay
from crdscope.session.notes import CastMember, Note
from crdscope.session.recorder import ClusterInfo, Recorder
from crdscope.session.replay import read_recording
from crdscope.session.report import summarise

T0 = 1_796_700_000.0


def record(path, context: str, times: list[float], notes: list[Note] = ()):
    with Recorder(path, ClusterInfo("https://127.0.0.1:6443", context, "v1.37.2")) as recorder:
        for t in times:
            recorder.record(HealthSample(timestamp=t, rss_bytes=int(t - T0) * 2**20))
        for note in notes:
            recorder.record(note)
    return path


def test_a_note_is_one_line_of_the_recording_and_reads_back_equal(tmp_path):
    cast = (CastMember("demo-126", "ctx-126", "1.26", 4 * 2**30), CastMember("demo-137", "ctx-137", "1.37"))
    notes = [Note(T0 + 1.5, "demo-126 beside demo-137", cast=cast),
             Note(T0 + 0.5, "demo-126 at 80% of its cap", "warning", "figures")]
    path = record(tmp_path / "a.jsonl", "ctx-126", [T0, T0 + 1, T0 + 2], notes)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["type"] for r in lines] == ["header", "sample", "sample", "sample", "note", "note", "end"]
    recording = read_recording(path)
    assert recording.notes == sorted(notes, key=lambda n: n.timestamp) and recording.damage is None
    assert len(recording.samples) == 3
    assert summarise(path).samples == {"health": 3}  # a report counts no note as a sample


def test_a_damaged_note_stops_the_reading_there(tmp_path):
    path = record(tmp_path / "a.jsonl", "ctx", [T0, T0 + 1])
    lines = path.read_text().splitlines()
    lines.insert(2, json.dumps({"type": "note", "data": {"timestamp": T0, "line": "x", "kind": "gossip"}}))
    path.write_text("\n".join(lines) + "\n")
    recording = read_recording(path)
    assert recording.damage is not None and recording.damage.line == 3 and len(recording.samples) == 1


async def test_two_recordings_play_on_one_clock_each_into_its_core_and_notes_between_samples(tmp_path):
    first = read_recording(record(tmp_path / "a.jsonl", "a", [T0 + 0.0, T0 + 2.0, T0 + 4.0],
                                  [Note(T0 + 2.5, "after a's second sample"), Note(T0 + 9.0, "after both")]))
    second = read_recording(record(tmp_path / "b.jsonl", "b", [T0 + 1.0, T0 + 3.0]))
    replay = FleetReplay([first, second], speed=0)
    heard: list[str] = []
    replay.note_listeners.append(lambda note: heard.append(f"note: {note.line}"))
    replay.end_listeners.append(lambda: heard.append("end"))
    cores = replay.cores()
    for core in cores:
        core.add_listener(lambda taken, name=core.cluster: heard.append(f"{name} {taken.sample.timestamp - T0:g}"))
    assert [core.cluster for core in cores] == ["a", "b"]
    # Both cores run their port, as an app runs each session: the one play serves both.
    await asyncio.wait_for(asyncio.gather(cores[0].run(), cores[1].run()), timeout=10)
    assert heard == ["a 0", "b 1", "a 2", "note: after a's second sample", "b 3", "a 4", "note: after both", "end"]
    assert (cores[0].samples, cores[1].samples) == (3, 2)
    assert cores[0].source.now() == cores[1].source.now() == T0 + 4.0


async def test_pausing_one_port_pauses_the_whole_replay(tmp_path):
    first = read_recording(record(tmp_path / "a.jsonl", "a", [T0, T0 + 60.0]))
    second = read_recording(record(tmp_path / "b.jsonl", "b", [T0 + 1.0]))
    replay = FleetReplay([first, second], speed=1.0)
    cores = replay.cores()
    cores[1].source.pause()
    assert cores[0].source.paused and replay.feed.paused
    playing = asyncio.ensure_future(cores[0].run())
    await asyncio.sleep(0.2)  # deliberate: nothing must arrive while paused
    assert cores[0].samples == cores[1].samples == 0
    playing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await playing
