"""The command line's own defects: a lazy command that does not load fails loudly (it showed as
"No such command"), and ``crdscope probe`` checks its flags against what each probe declares
(it guessed from any TypeError that mentioned an "unexpected keyword")."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner

from crdscope.base.paths import state_dir
from crdscope.cli.main import LAZY_COMMANDS, Group, cli

#: Nothing listens there: a test that got as far as connecting would fail with "connection refused".
UNREACHABLE = "https://127.0.0.1:1"


def broken_group() -> click.Group:
    @click.group(cls=Group, lazy_commands={
        "gone": "crdscope.tui.no_such_module:command",      # the module does not import
        "renamed": "crdscope.cli.main:no_such_command",      # the module has no such attribute
    })
    def group() -> None:
        """A group with two broken commands."""

    return group


@pytest.mark.parametrize(("name", "error"), [("gone", "ModuleNotFoundError"), ("renamed", "AttributeError")])
@pytest.mark.parametrize("extra", [[], ["--help"], ["--some-flag", "x"]])
def test_a_command_that_does_not_load_fails_in_one_line_with_the_details_in_the_log(name, error, extra):
    result = CliRunner().invoke(broken_group(), [name, *extra])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 70, result.output
    assert len(lines) == 1 and lines[0].startswith(f"crdscope: command '{name}' cannot load") and error in lines[0]
    log = state_dir() / "crdscope.log"
    assert f"details in {log}" in lines[0]
    assert "Traceback (most recent call last)" in log.read_text() and error in log.read_text()


def test_the_help_lists_a_broken_command_as_broken():
    result = CliRunner().invoke(broken_group(), ["--help"])
    assert result.exit_code == 0
    assert "gone" in result.output and "cannot load" in result.output


def test_every_listed_command_loads():
    context = click.Context(cli)
    for name in LAZY_COMMANDS:
        command = cli.get_command(context, name)
        assert command is not None and "cannot load" not in (command.help or ""), name


def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": UNREACHABLE}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return path


@pytest.mark.parametrize(("argv", "line"), [
    (["version", "--legacy"], "crdscope: probe version does not take --legacy (it takes no options)"),
    (["discovery", "--legacy", "--prometheus", "http://p"],
     "crdscope: probe discovery does not take --prometheus (it takes --burst, --kubectl, --legacy, --qps)"),
    (["health", "--qps", "5"], "crdscope: probe health does not take --qps (it takes --prometheus)"),
    # A catch-all **options declares nothing: the flag would be silently ignored.
    (["inventory", "--legacy"], "crdscope: probe inventory does not take --legacy (it takes no options)"),
])
def test_a_flag_the_probe_does_not_declare_is_refused_before_connecting(tmp_path, argv, line):
    result = CliRunner().invoke(cli, ["probe", *argv, "--kubeconfig", str(kubeconfig(tmp_path))])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [line]


def test_a_type_error_inside_a_probe_is_an_internal_error_not_a_bad_flag(tmp_path, monkeypatch):
    async def buggy_discovery(cluster, legacy: bool = False):
        raise TypeError("parse() got an unexpected keyword argument 'strict'")  # a bug in the probe

    monkeypatch.setattr("crdscope.probes.registry.oneshot", lambda name: buggy_discovery)
    result = CliRunner().invoke(cli, ["probe", "discovery", "--legacy", "--kubeconfig", str(kubeconfig(tmp_path))])
    assert result.exit_code == 70
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crdscope: internal error: parse() got an unexpected keyword")


def test_a_headless_watch_refuses_a_loader_source_instead_of_ignoring_it():
    # It was accepted and silently ignored: the headless watch does not load.
    result = CliRunner().invoke(cli, ["watch", "--headless", "--source", "synthetic:3", "--kubeconfig", "/nonexistent"])
    assert result.exit_code == 2, result.output
    assert "--source" in result.output and "crdscope load" in result.output
