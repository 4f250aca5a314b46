"""The demos' provider when none is given: the shared GCP set where it is, else the generated family."""

from __future__ import annotations

from click.testing import CliRunner

from crdscope.loader.crossplane_install import package_name_of
from crdscope.loader.package import family_package_name
from crdscope.loader.sources import open_source
from crdscope.tui import launch
from crdscope.tui.screens import loader_setup


def test_the_shared_gcp_set_is_the_default_where_it_is(tmp_path, monkeypatch):
    shared = tmp_path / "shared" / "crds"
    shared.mkdir(parents=True)
    (shared / launch.DEFAULT_PROVIDER).write_bytes(b"")
    monkeypatch.setattr(loader_setup, "SHARED_CRD_DIRS", (tmp_path / "absent", shared))
    said: list[str] = []
    assert launch.default_provider(said.append) == str(shared / launch.DEFAULT_PROVIDER)
    assert said == []


def test_without_the_shared_sets_the_default_is_the_generated_family_said_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(loader_setup, "SHARED_CRD_DIRS", (tmp_path / "a" / "crds", tmp_path / "b" / "crds"))
    said: list[str] = []
    chosen = launch.default_provider(said.append)
    assert len(said) == 1 and chosen in said[0] and launch.DEFAULT_PROVIDER in said[0]
    source = open_source(chosen)  # what the demos open: a source, no file needed
    assert source.spec == chosen and source.estimate and source.estimate > 0
    assert family_package_name(package_name_of(chosen)) == "provider-family-synthetic"


def test_the_help_of_both_demos_names_both_defaults():
    from crdscope.cli.demo import demo
    from crdscope.cli.lab import lab

    for command in (demo, lab):
        text = " ".join(CliRunner().invoke(command, ["--help"], terminal_width=200).output.split())
        assert launch.DEFAULT_PROVIDER in text and launch.GENERATED_PROVIDER in text, text
