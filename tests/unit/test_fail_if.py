"""``--fail-if`` expressions, durations and listen addresses: parsed and validated before anything runs."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from crdscope.base.errors import ConfigError
from crdscope.base.samples.health import HealthSample
from crdscope.session.exporter import parse_listen
from crdscope.session.failif import parse_threshold, parse_thresholds
from crdscope.session.headless import parse_duration
from crdscope.cli.main import cli


@pytest.mark.parametrize("text, op, limit", [
    ("health.restarts>0", ">", 0.0),
    (" health.restarts >= 2 ", ">=", 2.0),
    ("health.open_fds<=1e3", "<=", 1000.0),
    ("health.rss_bytes<.5", "<", 0.5),
    ("health.goroutines==-1", "==", -1.0),
    ("health.crds!=300", "!=", 300.0),
])
def test_valid_expressions(text, op, limit):
    threshold = parse_threshold(text)
    assert (threshold.probe, threshold.op, threshold.limit) == ("health", op, limit)


@pytest.mark.parametrize("text, complaint", [
    ("health.restartz>0", "has no field 'restartz'"),
    ("healthy.restarts>0", "unknown probe 'healthy'"),
    ("health.server>1", "is text, not a number"),
    ("health.outages.start>1", "is not a record"),
    ("health.restarts>>1", "is not <probe>.<field><op><number>"),
    ("restarts>0", "is not <probe>.<field><op><number>"),
    ("health.restarts>many", "is not <probe>.<field><op><number>"),
    ("health.restarts", "is not <probe>.<field><op><number>"),
])
def test_bad_expressions_are_config_errors(text, complaint):
    with pytest.raises(ConfigError) as caught:
        parse_threshold(text)
    assert complaint in str(caught.value)
    assert caught.value.exit_code == 2
    assert "\n" not in str(caught.value)


def test_the_field_list_is_offered_for_an_unknown_field():
    with pytest.raises(ConfigError) as caught:
        parse_threshold("health.restartz>0")
    assert "restarts" in str(caught.value) and "rss_bytes" in str(caught.value)


def test_nested_figures_are_reached_with_dots():
    threshold = parse_threshold("health.storage_objects_top.customresourcedefinitions.apiextensions.k8s.io>5")
    # a dict of figures takes the rest of the path as its key (resource names hold dots)
    assert threshold.path == ("storage_objects_top", "customresourcedefinitions.apiextensions.k8s.io")
    sample = HealthSample(storage_objects_top={"customresourcedefinitions.apiextensions.k8s.io": 7, "pods": 9})
    assert threshold.crossed(sample) == 7.0
    assert parse_threshold("health.storage_objects_top.pods>8").crossed(sample) == 9.0


def test_crossing_reads_the_sample_of_its_probe_only():
    restarts = parse_threshold("health.restarts>0")
    assert restarts.crossed(HealthSample(restarts=1)) == 1.0
    assert restarts.crossed(HealthSample(restarts=0)) is None
    assert restarts.crossed(HealthSample(restarts=None)) is None  # unobservable is not zero
    # A failed sample's figures are defaults ...
    assert parse_threshold("health.rss_bytes>0").crossed(HealthSample(rss_bytes=5, error="down")) is None
    # ... except what it knows of the failure itself: restarts so far, down and for how long.
    assert restarts.crossed(HealthSample(restarts=3, error="refused")) == 3.0
    down = parse_threshold("health.down_seconds>30")
    assert down.crossed(HealthSample(down=True, down_seconds=31.0, error="refused")) == 31.0
    assert down.crossed(HealthSample(down=True, down_seconds=12.0, error="refused")) is None
    assert parse_threshold("health.down>0").crossed(HealthSample(down=True, error="refused")) == 1.0
    failing = parse_threshold("health.failing_checks>0")  # a collection compares by its size
    assert failing.crossed(HealthSample(failing_checks=("etcd",))) == 1.0
    assert failing.crossed(HealthSample(failing_checks=())) is None
    at_most = parse_threshold("health.mib_per_crd<=3")
    assert at_most.crossed(HealthSample(mib_per_crd=3.0)) == 3.0
    assert at_most.crossed(HealthSample(mib_per_crd=3.01)) is None


def test_all_expressions_are_checked_before_any_runs():
    with pytest.raises(ConfigError) as caught:
        parse_thresholds(["health.restarts>0", "health.nope>1"])
    assert "nope" in str(caught.value)


@pytest.mark.parametrize("text, seconds", [("90s", 90), ("5m", 300), ("1h", 3600), ("1h30m", 5400),
                                           ("45", 45), ("1.5m", 90), ("500ms", 0.5), ("2d", 172800)])
def test_durations(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["5x", "", "m5", "-1s", "0", "1h 30m", "s"])
def test_bad_durations(text):
    with pytest.raises(ConfigError):
        parse_duration(text)


@pytest.mark.parametrize("text, expected", [(":9100", ("0.0.0.0", 9100)), ("127.0.0.1:8080", ("127.0.0.1", 8080)),
                                            ("[::1]:9100", ("::1", 9100)), ("9100", ("0.0.0.0", 9100))])
def test_listen_addresses(text, expected):
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", ["localhost:http", ":99999", "host:"])
def test_bad_listen_addresses(text):
    with pytest.raises(ConfigError):
        parse_listen(text)


def test_unknown_field_exits_2_before_connecting(tmp_path):
    # The kubeconfig does not exist: had crdscope tried to connect first, it would complain about it.
    missing = tmp_path / "no-such-kubeconfig"
    result = CliRunner().invoke(cli, ["watch", "--headless", "--kubeconfig", str(missing),
                                      "--fail-if", "health.restarts>0", "--fail-if", "discovery.bogus>1"])
    assert result.exit_code == 2
    assert "bogus" in result.output and "kubeconfig" not in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_bad_duration_exits_2_before_connecting(tmp_path):
    result = CliRunner().invoke(cli, ["watch", "--headless", "--kubeconfig", str(tmp_path / "none"),
                                      "--duration", "soon"])
    assert result.exit_code == 2 and "--duration 'soon'" in result.output
