"""Recordings made before samples were encoded by msgspec replay unchanged.

``tests/data/recording-0.1.0-handwritten-encoder.jsonl.xz`` is a real session of the monitor
on a lab (every monitor probe, a loader run), recorded when ``Sample.to_json``/``from_json``
were hand-written.  Each of its samples must rebuild, and encode back to exactly what was
recorded: the recording format did not change with the encoder.  Fields added to a sample since
(:data:`ADDED_SINCE`, each path named) are the only difference allowed: an old recording rebuilds them
at their defaults.
"""

from __future__ import annotations

import json
import lzma
from pathlib import Path

from crdscope.probes.registry import monitor_probes, sample_type
from crdscope.session.recorder import sample_line
from crdscope.session.replay import read_recording

RECORDING = Path(__file__).parent.parent / "data" / "recording-0.1.0-handwritten-encoder.jsonl.xz"
#: probe -> paths (keys from the sample's top) of fields added after the recording was made.
#: (Fields with a plain default are not written for a rebuilt sample, so only a default_factory field counts.)
ADDED_SINCE = {"inventory": (("crossplane", "activation"),), "latency": (("requests_over_slo",),)}
#: Probes added after the recording was made (it has no sample of theirs).
PROBES_ADDED_SINCE = {"webhooks"}


def without_added(probe: str, data: dict) -> dict:
    """``data`` without the fields added to ``probe``'s sample since the recording (named, not guessed)."""
    data = json.loads(json.dumps(data))
    for path in ADDED_SINCE.get(probe, ()):
        parent = data
        for key in path[:-1]:
            parent = parent.get(key) or {}
        assert path[-1] in parent or not parent, f"{probe}: {'.'.join(path)} is no longer a field"
        parent.pop(path[-1], None)
    return data


def test_every_recorded_sample_rebuilds_and_encodes_back_to_what_was_recorded():
    records = [json.loads(line) for line in lzma.decompress(RECORDING.read_bytes()).decode().splitlines()]
    samples = [r for r in records if r["type"] == "sample"]
    assert {r["probe"] for r in samples} >= set(monitor_probes()) - PROBES_ADDED_SINCE
    for record in samples:
        rebuilt = sample_type(record["probe"]).from_json(record["data"])
        assert without_added(record["probe"], rebuilt.to_json()) == record["data"], record["probe"]


def test_the_recorder_writes_each_recorded_sample_back_to_the_same_bytes():
    lines = lzma.decompress(RECORDING.read_bytes()).splitlines(keepends=True)
    sample_lines = [line for line in lines if json.loads(line)["type"] == "sample"]
    assert sample_lines
    for line in sample_lines:
        record = json.loads(line)
        written = sample_line(sample_type(record["probe"]).from_json(record["data"]))
        if record["probe"] in ADDED_SINCE:  # the same record with the added fields, key order kept
            assert without_added(record["probe"], json.loads(written)["data"]) == record["data"], record["probe"]
            assert list(json.loads(written)) == list(record)
        else:
            assert written == line, record["probe"]


def test_the_old_recording_replays_without_damage(tmp_path):
    path = tmp_path / "old.jsonl"
    path.write_bytes(lzma.decompress(RECORDING.read_bytes()))
    recording = read_recording(path)
    assert recording.damage is None
    assert len(recording.samples) == sum(1 for line in path.read_text().splitlines() if '"type":"sample"' in line)
