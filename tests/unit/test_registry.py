"""The one table of probes: every row resolves to what it names, and nothing else names probes."""

from __future__ import annotations

import importlib
import inspect

import pytest

from crdscope.probes import registry
from crdscope.probes.probe import Pacing, ProbeBase
from crdscope.base.errors import ConfigError
from crdscope.base.samples import Sample
from crdscope.base.settings import Cadences, RequestBudgets


@pytest.mark.parametrize("kind", registry.PROBES, ids=lambda k: k.name)
def test_each_row_names_its_sample_module_and_loads_its_probe(kind):
    cls = registry.sample_type(kind.name)
    assert cls is not Sample and issubclass(cls, Sample) and cls.probe == kind.name
    # Readers import a probe's sample from the foundations, never from the probe's module.
    assert cls.__module__ == kind.samples == f"crdscope.base.samples.{kind.name}"
    assert importlib.import_module(kind.samples).__dict__[cls.__name__] is cls
    if kind.load is None:
        return
    entry = kind.entry()
    assert entry.sample is cls
    assert issubclass(entry.probe, ProbeBase) and entry.probe.name == kind.name
    assert isinstance(entry.probe.pacing, Pacing) and entry.probe.pacing.busy > 0
    assert registry.factory(kind.name) is entry.factory
    # Every factory takes the monitor's parts (probes.probe.ProbeParts), not the Monitor, and makes
    # the row's probe (the modules' annotations are strings: ``from __future__ import annotations``).
    signature = inspect.signature(entry.factory)
    assert [p.annotation for p in signature.parameters.values()] == ["ProbeParts"], signature
    assert signature.return_annotation == entry.probe.__name__, signature
    if kind.oneshot:
        assert entry.oneshot is not None and registry.oneshot(kind.name) is entry.oneshot


def test_names_are_unique_and_the_loader_is_recorded_but_not_run():
    names = [kind.name for kind in registry.PROBES]
    assert len(names) == len(set(names))
    assert "loader" in names and "loader" not in registry.monitor_probes()
    assert "loader" not in registry.oneshot_probes()
    assert registry.monitor_probes()[:2] == ["version", "inventory"]  # the display order


def test_unknown_names():
    with pytest.raises(ConfigError, match="unknown probe 'nope'.*version"):
        registry.oneshot("nope")
    with pytest.raises(ConfigError, match="unknown probe 'footprint'"):
        registry.oneshot("footprint")  # run by the monitor, no one-shot form
    with pytest.raises(KeyError):
        registry.factory("loader")
    assert registry.sample_type("nope") is Sample
    assert registry.pacing_of("loader", Cadences()) is None


def test_a_probe_declares_its_pacing_and_config_toml_overrides_it():
    from crdscope.probes.discovery import DiscoveryProbe

    declared = DiscoveryProbe.pacing
    assert registry.pacing_of("discovery", Cadences()) == declared
    assert declared.idle is not None and declared.budget is not None
    set_here = registry.pacing_of("discovery", Cadences(discovery=7.0, discovery_idle=90.0), RequestBudgets(discovery=20.0))
    assert set_here == Pacing(busy=7.0, idle=90.0, budget=20.0)
    # A key for the busy cadence alone leaves the idle one as declared.
    assert registry.pacing_of("discovery", Cadences(discovery=7.0)) == Pacing(7.0, declared.idle, declared.budget)
    # A probe that declares no idle cadence keeps none.
    assert registry.pacing_of("inventory", Cadences(inventory=0.2)).idle is None
