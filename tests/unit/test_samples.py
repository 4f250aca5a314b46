"""Samples round-trip through JSON unchanged (the recorder/replay contract)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from crdscope.probes.registry import sample_type
from crdscope.base.samples import SAMPLE_TYPES, Sample, percentile


@dataclasses.dataclass(frozen=True)
class Inner:
    name: str
    seconds: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class RoundTripSample(Sample):
    probe = "roundtrip-test"
    count: int = 0
    ratio: float = 0.0
    maybe: float | None = None
    names: tuple[str, ...] = ()
    inners: tuple[Inner, ...] = ()
    by_key: dict[str, int] = dataclasses.field(default_factory=dict)
    nested: dict[str, Inner] = dataclasses.field(default_factory=dict)


def test_round_trip_through_json_text():
    sample = RoundTripSample(count=3, ratio=2.0, maybe=None, names=("a", "b"),
                             inners=(Inner("x", 1.5), Inner("y", 2.0)), by_key={"k": 1},
                             nested={"n": Inner("z", 3.0)}, error=None)
    text = json.dumps(sample.to_json())
    back = RoundTripSample.from_json(json.loads(text))
    assert back == sample
    assert SAMPLE_TYPES["roundtrip-test"] is RoundTripSample
    assert sample_type("roundtrip-test") is RoundTripSample


def test_nan_becomes_null_and_unknown_keys_are_ignored():
    data = RoundTripSample(ratio=math.nan).to_json()
    assert data["ratio"] is None
    data["added_in_a_later_version"] = 1
    assert RoundTripSample.from_json(data).count == 0


def test_percentile_by_hand():
    assert percentile([], 50) is None
    assert percentile([4.0], 95) == 4.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 95) == 4.8


def test_a_nan_recorded_as_null_in_a_plain_float_leaves_the_field_at_its_default():
    data = RoundTripSample(count=3, names=("a",), ratio=math.inf).to_json()
    assert data["ratio"] is None
    back = RoundTripSample.from_json(data)
    assert (back.count, back.names, back.ratio) == (3, ("a",), 0.0)


@pytest.mark.parametrize("damage", [{"timestamp": "yesterday"}, {"timestamp": None},
                                    {"inners": [{"name": "x", "seconds": "not a number"}]},
                                    {"inners": [{"nom": "x"}]}, {"count": "three"}])
def test_what_does_not_fit_is_a_value_error(damage):
    with pytest.raises(ValueError, match="not a RoundTripSample"):
        RoundTripSample.from_json({**RoundTripSample().to_json(), **damage})
