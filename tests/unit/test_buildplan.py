"""What a first ``make demo`` builds and about how long, said before the first build (issue 48 item 4)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from crdscope.lab import buildplan
from crdscope.lab.binaries import pinned_versions, versions_for
from crdscope.lab.buildplan import PlannedBuild, plan_line, planned_builds, scaled_minutes
from crdscope.toolchain import crossplane as toolchain_crossplane


@pytest.fixture
def empty_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def built(cache: Path, minor: str) -> None:
    """A kube-apiserver and etcd in the cache as a build leaves them (stamp included)."""
    import json

    versions = versions_for(minor)
    target = cache / "crdscope" / "controlplane" / versions.kubernetes
    target.mkdir(parents=True)
    for name in ("kube-apiserver", "etcd"):
        (target / name).write_text("#!/bin/sh\n")
        (target / name).chmod(0o755)
    (target / "build.json").write_text(json.dumps({"kubernetes": versions.kubernetes, "etcd": versions.etcd}))


def test_an_empty_cache_plans_every_build_of_the_fleet_demo_in_build_order(empty_cache):
    newest = pinned_versions()
    planned = planned_builds(["1.37", "1.26"], crossplane=True, controllers=True, controllers_for="1.37")
    cli, core = toolchain_crossplane.CLI_RELEASE.version, toolchain_crossplane.release_of().version
    assert [p.what for p in planned] == [
        f"Crossplane {cli}'s CLI, crane and core", f"Crossplane {core}'s core",
        f"kube-controller-manager {newest.kubernetes}",
        f"kube-apiserver {newest.kubernetes} and etcd {newest.etcd}",  # etcd once, with the first
        f"kube-apiserver {versions_for('1.26').kubernetes}"]


def test_what_is_cached_is_not_planned(empty_cache):
    built(empty_cache, "1.37")
    assert [p.what for p in planned_builds(["1.37", "1.26"])] == [f"kube-apiserver {versions_for('1.26').kubernetes}"]
    built(empty_cache, "1.26")
    assert planned_builds(["1.37", "1.26"]) == [] and plan_line([]) == ""


def test_the_estimate_scales_with_cores_and_says_it_is_one():
    assert scaled_minutes(10, buildplan.MEASURED_CORES) == pytest.approx(10)
    # A fifth does not speed up: 4 cores take 0.2 + 0.8 / 2 = 60%, one core 180%, many cores toward 20%.
    assert scaled_minutes(10, 4) == pytest.approx(6) and scaled_minutes(10, 1) == pytest.approx(18)
    assert scaled_minutes(10, 1000) == pytest.approx(2, abs=0.05)
    planned = [PlannedBuild("kube-apiserver v1.26.15", (8, 15)), PlannedBuild("Crossplane v2.4.2's core", (3, 6))]
    line = plan_line(planned, cores=2)
    assert line.startswith("to build from Go modules first: kube-apiserver v1.26.15 (about 8-15 min), "
                           "Crossplane v2.4.2's core (about 3-6 min); about 11-21 min in all on this machine's 2 cores")
    assert "an estimate" in line
    assert "about 7-13 min in all on this machine's 4 cores" in plan_line(planned, cores=4)


def crdscope(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crdscope.cli.main", *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **env})


def test_lab_build_says_the_plan_first_and_nothing_without_go(empty_cache, tmp_path):
    built(empty_cache, "1.37")
    built(empty_cache, "1.26")
    cached = crdscope("lab", "build", "--kubernetes", "1.37", "--kubernetes", "1.26", env={})
    assert cached.returncode == 0 and "to build" not in cached.stderr, cached.stderr
    assert cached.stdout.count("already built") == 2
    # Nothing built for 1.33 and no Go to build it: the build's one-line error, no estimate before it.
    no_go = crdscope("lab", "build", "--kubernetes", "1.33", env={"PATH": str(tmp_path / "no-bin")})
    assert no_go.returncode != 0 and "to build" not in no_go.stderr
    assert len(no_go.stderr.strip().splitlines()) == 1, no_go.stderr
