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


def test_a_prerelease_minor_is_supported_but_never_the_default():
    from crdscope.lab.binaries import PRERELEASES, is_prerelease, released_minors, supported_minors

    assert versions_for("1.38").kubernetes == PRERELEASES["1.38"] and is_prerelease(PRERELEASES["1.38"])
    assert not is_prerelease(versions_for(None).kubernetes) and not is_prerelease("v1.37.2")
    assert is_prerelease("v1.38.0-rc.1")
    # Thirteen minors, 1.26 to 1.38; the default is the newest released one.
    assert supported_minors()[-1] == "1.38" and len(supported_minors()) == 13
    assert released_minors()[-1] == versions_for(None).minor == "1.37"
    assert "1.38" not in released_minors()


def test_the_toolchain_of_a_release_that_needs_a_newer_go_is_the_named_one_and_said():
    from crdscope.toolchain.gobuild import NEWER_TOOLCHAIN, go_version, toolchain_for, version_key

    env = go_env()
    local = go_version(env)
    same, why = toolchain_for(local.removeprefix("go"), env)
    assert same is env and why == ""
    newer = ".".join(str(n) for n in (*version_key(local)[:1], version_key(local)[1] + 1, 0))
    needed, why = toolchain_for(newer, env)
    if version_key(newer) <= version_key(NEWER_TOOLCHAIN):
        assert needed["GOTOOLCHAIN"] == NEWER_TOOLCHAIN and f"GOTOOLCHAIN={NEWER_TOOLCHAIN}" in why
        assert f"needs Go {newer}" in why and local in why
    with pytest.raises(LabError, match="newer than"):
        toolchain_for("9.0", env)
    assert version_key("go1.27.3") == (1, 27, 3) and version_key("1.27") == (1, 27, 0)


@pytest.mark.skipif(shutil.which("go") is None, reason="needs the Go toolchain")
def test_newest_tag_of_a_prerelease_asks_later_prereleases_then_the_release(tmp_path: Path):
    """The proxy lists no pre-release: each later tag is asked for by name, the release first."""
    from crdscope.lab.binaries import newest_tag

    proxy = tmp_path / "proxy"
    go_mod = {"go.mod": "module k8s.io/kubernetes\n\ngo 1.21\n"}
    for tag in ("v1.97.0-beta.0", "v1.97.0-rc.0", "v1.97.0-rc.1", "v1.96.0-beta.0", "v1.96.0", "v1.96.1"):
        _publish(proxy, "k8s.io/kubernetes", tag, go_mod)
    (proxy / "k8s.io/kubernetes/@v/list").write_text("")
    env = {**go_env(), "GOPROXY": f"file://{proxy}", "GOSUMDB": "off", "GOMODCACHE": str(tmp_path / "modcache"),
           "GOFLAGS": "-mod=mod -modcacherw"}
    assert newest_tag("1.97", after="v1.97.0-beta.0", env=env) == "v1.97.0-rc.1"
    assert newest_tag("1.97", after="v1.97.0-rc.1", env=env) == "v1.97.0-rc.1"
    assert newest_tag("1.96", after="v1.96.0-beta.0", env=env) == "v1.96.1"  # released since
    assert newest_tag("1.96", after="v1.96.0", env=env) == "v1.96.1"


def test_the_newest_tags_asked_are_kept_for_the_next_listing(tmp_path: Path):
    from crdscope.lab.binaries import read_newest, record_newest

    path = tmp_path / "newest.json"
    assert read_newest(path) == {}
    record_newest("1.38", "v1.38.0-rc.0", path)
    record_newest("1.37", "v1.37.3", path)
    known = read_newest(path)
    assert known["1.38"]["tag"] == "v1.38.0-rc.0" and known["1.37"]["tag"] == "v1.37.3"
    assert known["1.38"]["checked_at"] > 0
    path.write_text("[not json")
    assert read_newest(path) == {}


def test_lab_versions_marks_the_prerelease_and_says_a_newer_tag_was_served(tmp_path, monkeypatch):
    import json

    from click.testing import CliRunner

    from crdscope.cli.main import cli
    from crdscope.lab.binaries import newest_record_path, record_newest

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    record_newest("1.38", "v1.38.0-rc.0", newest_record_path())
    text = CliRunner().invoke(cli, ["lab", "versions"])
    assert text.exit_code == 0, text.output
    rows = {line.split()[0]: line for line in text.output.splitlines() if line[:1].isdigit()}
    assert len(rows) == 13 and "pre-release" in rows["1.38"] and "pre-release" not in rows["1.37"]
    assert "(the default)" in rows["1.37"]
    assert "the proxy serves v1.38.0-rc.0" in rows["1.38"] and "lab versions --newest" in rows["1.38"]
    listed = CliRunner().invoke(cli, ["lab", "versions", "--json"])
    minors = [json.loads(line) for line in listed.output.splitlines() if "minor" in json.loads(line)]
    by_minor = {row["minor"]: row for row in minors}
    assert by_minor["1.38"]["prerelease"] is True and by_minor["1.38"]["newer_served"] == "v1.38.0-rc.0"
    assert by_minor["1.37"]["default"] is True and "newer_served" not in by_minor["1.37"]
    crossplane = [json.loads(line) for line in listed.output.splitlines() if "crossplane" in json.loads(line)]
    assert [row["line"] for row in crossplane] == ["v2.4", "v2.0"] and crossplane[0]["default"] is True
