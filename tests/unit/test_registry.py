"""The one table of probes: every row resolves to what it names, and nothing else names probes."""

from __future__ import annotations

import importlib

import pytest

from crdscope.probes import registry
from crdscope.base.errors import ConfigError
from crdscope.base.samples import Sample


@pytest.mark.parametrize("kind", registry.PROBES, ids=lambda k: k.name)
def test_each_row_names_a_module_its_sample_class_and_its_callables(kind):
    module = importlib.import_module(kind.module)
    sample_module, _, sample_name = kind.sample.rpartition(":")
    cls = getattr(importlib.import_module(sample_module or kind.module), sample_name)
    assert issubclass(cls, Sample) and cls.probe == kind.name
    # Readers import a probe's sample from the foundations, never from the probe's module.
    assert cls.__module__ == f"crdscope.base.samples.{kind.name}"
    assert registry.sample_type(kind.name) is cls
    if kind.factory:
        assert callable(getattr(module, kind.factory)) and registry.factory(kind.name) is getattr(module, kind.factory)
    if kind.oneshot:
        assert callable(getattr(module, kind.oneshot)) and registry.oneshot(kind.name) is getattr(module, kind.oneshot)


def test_names_are_unique_and_the_loader_is_recorded_but_not_run():
    names = [kind.name for kind in registry.PROBES]
    assert len(names) == len(set(names))
    assert "loader" in names and "loader" not in registry.monitor_probes()
    assert "loader" not in registry.oneshot_probes()
    assert registry.monitor_probes()[:2] == ["version", "inventory"]  # the display order


def test_unknown_names():
    with pytest.raises(ConfigError, match="unknown probe 'nope'.*version"):
        registry.oneshot("nope")
    with pytest.raises(KeyError):
        registry.factory("loader")
    assert registry.sample_type("nope") is Sample
