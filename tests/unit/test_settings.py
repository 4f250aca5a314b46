"""config.toml: typed settings, and one clear line for a value that is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from crdscope.base.settings import ConfigError, Settings, load_settings


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_missing_file_is_the_defaults(tmp_path: Path):
    assert load_settings(tmp_path / "absent.toml") == Settings()


def test_the_watch_pause_is_read_and_an_int_is_a_float(tmp_path: Path):
    settings = load_settings(write(tmp_path, "[budgets]\ncrd_watch_coalesce_seconds = 0\n"))
    assert settings.budgets.crd_watch_coalesce_seconds == 0.0
    assert isinstance(settings.budgets.crd_watch_coalesce_seconds, float)
    assert load_settings(write(tmp_path, "[budgets]\ncrd_watch_coalesce_seconds = 0.5\n")
                         ).budgets.crd_watch_coalesce_seconds == 0.5


@pytest.mark.parametrize("value", ["-0.1", "2.5", "60"])
def test_a_watch_pause_out_of_range_is_one_line(tmp_path: Path, value: str):
    path = write(tmp_path, f"[budgets]\ncrd_watch_coalesce_seconds = {value}\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    message = str(caught.value)
    assert "\n" not in message
    assert "budgets.crd_watch_coalesce_seconds must be between 0 and 2" in message and str(path) in message


@pytest.mark.parametrize("text, expected", [
    ("[budgets]\ncrd_watch_coalesce_seconds = \"fast\"\n", "must be float"),
    ("[budgets]\nno_such = 1\n", "unknown setting budgets.no_such"),
    ("[nosection]\nx = 1\n", "unknown section [nosection]"),
    ("[prometheus_url]\nx = 1\n", "prometheus_url must be a string"),
    ("prometheus_url = 9090\n", "prometheus_url must be a string"),
    ("[budgets\n", "config.toml"),
])
def test_bad_settings_are_one_line(tmp_path: Path, text: str, expected: str):
    with pytest.raises(ConfigError) as caught:
        load_settings(write(tmp_path, text))
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_prometheus_url_is_read_as_written(tmp_path: Path):
    assert load_settings(write(tmp_path, 'prometheus_url = "http://127.0.0.1:9090"\n')).prometheus_url == \
        "http://127.0.0.1:9090"
