"""The lab's build from Go modules: staging replaces per release, and honest download counts.

The download count is checked with the real ``go`` command against a module proxy made of
files in a temporary directory (GOPROXY=file://...), with an empty module cache: no network.
"""

from __future__ import annotations

import io
import shutil
import zipfile
from pathlib import Path

import pytest

from crdscope.lab.binaries import staging_replaces, versions_for
from crdscope.base.errors import LabError
from crdscope.toolchain.gobuild import go_build, go_env

RELEASE_GO_MOD = """module k8s.io/kubernetes

go 1.19

require (
\tk8s.io/api v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/legacy-cloud-providers => ./staging/src/k8s.io/legacy-cloud-providers
\tgithub.com/example/fork => github.com/example/fork v1.2.3
)
"""


def test_staging_replaces_come_from_the_release():
    replaces = staging_replaces(RELEASE_GO_MOD, "v1.26.15")
    assert replaces == [("k8s.io/api", "v0.26.15"), ("k8s.io/legacy-cloud-providers", "v0.26.15")]


def test_real_release_go_mod_when_cached():
    cached = Path.home() / "go/pkg/mod/cache/download/k8s.io/kubernetes/@v/v1.26.15.mod"
    if not cached.exists():
        pytest.skip("k8s.io/kubernetes v1.26.15 is not in the Go module cache")
    names = [name for name, _ in staging_replaces(cached.read_text(), "v1.26.15")]
    assert len(names) == cached.read_text().count("=> ./staging/")
    assert "k8s.io/legacy-cloud-providers" in names and "k8s.io/kubernetes" not in names


def test_unsupported_minor_is_one_line():
    with pytest.raises(LabError, match="supported: .*1.26"):
        versions_for("1.2")
    assert versions_for("1.26").kubernetes.startswith("v1.26.")
    assert versions_for("v1.30").etcd == versions_for(None).etcd  # one etcd for every version


def _module_zip(path: str, version: str, files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(f"{path}@{version}/{name}", text)
    return buffer.getvalue()


def _publish(proxy: Path, path: str, version: str, files: dict[str, str]) -> None:
    where = proxy / path / "@v"
    where.mkdir(parents=True, exist_ok=True)
    (where / "list").write_text(version + "\n")
    (where / f"{version}.info").write_text(f'{{"Version":"{version}","Time":"2026-01-01T00:00:00Z"}}')
    (where / f"{version}.mod").write_text(files["go.mod"])
    (where / f"{version}.zip").write_bytes(_module_zip(path, version, files))


@pytest.mark.skipif(shutil.which("go") is None, reason="needs the Go toolchain")
def test_downloads_on_a_cold_cache_are_counted(tmp_path: Path):
    proxy = tmp_path / "proxy"
    _publish(proxy, "example.test/greeting", "v1.0.0", {
        "go.mod": "module example.test/greeting\n\ngo 1.21\n",
        "greeting.go": 'package greeting\n\nfunc Hello() string { return "hello" }\n',
    })
    _publish(proxy, "example.test/hello", "v1.0.0", {
        "go.mod": "module example.test/hello\n\ngo 1.21\n\nrequire example.test/greeting v1.0.0\n",
        "main.go": 'package main\n\nimport "example.test/greeting"\n\nfunc main() { println(greeting.Hello()) }\n',
    })
    module = tmp_path / "module"
    module.mkdir()
    (module / "go.mod").write_text("module example.test/consumer\n\ngo 1.21\n\nrequire example.test/hello v1.0.0\n")
    env = {**go_env(), "GOPROXY": f"file://{proxy}", "GOSUMDB": "off", "GOMODCACHE": str(tmp_path / "modcache"),
           "GOFLAGS": "-mod=mod -modcacherw -buildvcs=false"}
    lines: list[str] = []
    cold = go_build(module, ["example.test/hello"], tmp_path / "out", ldflags="-s -w", say=lines.append, env=env)
    assert cold["modules_downloaded"] == 2
    assert any("2 modules downloaded" in line for line in lines), lines
    assert (tmp_path / "out" / "hello").exists()
    lines.clear()
    warm = go_build(module, ["example.test/hello"], tmp_path / "out", ldflags="-s -w", say=lines.append, env=env)
    assert warm["modules_downloaded"] == 0
    assert any("0 modules downloaded" in line for line in lines), lines


def test_every_minor_from_the_oldest_to_the_newest_is_pinned_to_a_patch_of_its_own():
    from crdscope.lab.binaries import minor_of, supported_minors

    minors = supported_minors()
    assert [int(m.split(".")[1]) for m in minors] == list(range(26, int(minors[-1].split(".")[1]) + 1))
    for minor in minors:
        assert minor_of(versions_for(minor).kubernetes) == minor


def test_what_each_minor_serves_follows_the_release_history():
    from crdscope.lab.binaries import served_defaults

    assert served_defaults("1.26").aggregated_discovery == ()
    assert served_defaults("1.27").aggregated_discovery == ("v2beta1",)
    assert "v2" in served_defaults("1.30").aggregated_discovery
    assert served_defaults("1.33").aggregated_discovery == ("v2",)
    assert (served_defaults("1.28").flowcontrol, served_defaults("1.29").flowcontrol) == ("v1beta3", "v1")
    assert "AggregatedDiscoveryEndpoint" in served_defaults("1.26").notes()


def test_lab_errors_exit_with_the_readme_codes_not_loads_4(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from crdscope.cli.main import cli

    monkeypatch.setenv("CRDSCOPE_LAB_HOME", str(tmp_path / "home"))
    unknown = CliRunner().invoke(cli, ["lab", "up", "--kubernetes", "1.99"])
    assert unknown.exit_code == 2 and "not supported by the lab" in unknown.output
    not_up = CliRunner().invoke(cli, ["lab", "kill", "apiserver"])
    assert not_up.exit_code == 3 and "no lab" in not_up.output


@pytest.mark.skipif(shutil.which("go") is None, reason="needs the Go toolchain")
def test_newest_patch_asks_patch_by_patch_past_a_list_that_omits_releases(tmp_path: Path):
    """The proxy's list names an old patch only (as the real one does for 1.26-1.29): the newest is
    found by asking each patch, across a patch never released, until three in a row are absent."""
    from crdscope.lab.binaries import newest_patch

    proxy = tmp_path / "proxy"
    for patch in (0, 1, 3):  # v1.99.2 was never released
        _publish(proxy, "k8s.io/kubernetes", f"v1.99.{patch}", {"go.mod": "module k8s.io/kubernetes\n\ngo 1.21\n"})
    (proxy / "k8s.io/kubernetes/@v/list").write_text("v1.99.0\n")
    env = {**go_env(), "GOPROXY": f"file://{proxy}", "GOSUMDB": "off", "GOMODCACHE": str(tmp_path / "modcache"),
           "GOFLAGS": "-mod=mod -modcacherw"}
    assert newest_patch("1.99", env=env) == "v1.99.3"
    assert newest_patch("1.99", after="v1.99.1", env=env) == "v1.99.3"
    assert newest_patch("1.98", env=env) == ""
