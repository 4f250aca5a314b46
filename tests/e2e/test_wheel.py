"""The built wheel installs one package, `crdscope`, and works from a fresh virtualenv.

The fresh venv sees the test venv's third-party packages through a ``.pth`` line (no
network, no re-download), but not the project's editable install: a directory named by a
``.pth`` file is not itself scanned for ``.pth`` files, so the editable finder stays out and
every ``crdscope`` module must come from the wheel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "-w", str(out), str(ROOT)], check=True, capture_output=True, text=True, timeout=300)
    (built,) = out.glob("crdscope-*.whl")
    return built

#: The fleet demo's shipped recordings in this tree (none or both labs').
SHIPPED = sorted(p.name for p in (ROOT / "tui" / "data" / "fleet-demo").glob("*.jsonl.xz"))


def test_the_wheel_holds_only_the_crdscope_namespace(wheel: Path):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    top = {name.split("/")[0] for name in names}
    assert top == {"crdscope", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}
    # The packages and their data files are inside the namespace.
    for expected in ("crdscope/probes/scheduler.py", "crdscope/cli/main.py", "crdscope/lab/go.mod",
                     "crdscope/tui/monitor.tcss"):
        assert expected in names
    # The fleet demo's recording, when the tree has one (`crdscope demo --replay` from an installed wheel): both labs'.
    assert len(SHIPPED) in (0, 2), SHIPPED
    assert {f"crdscope/tui/data/fleet-demo/{name}" for name in SHIPPED} <= set(names)


def test_a_fresh_venv_runs_the_installed_wheel_against_the_lab(wheel: Path, tmp_path: Path):
    fresh = tmp_path / "fresh"
    venv.EnvBuilder(with_pip=False).create(fresh)
    fresh_python = fresh / "bin" / "python"
    fresh_site = Path(subprocess.run([str(fresh_python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                     check=True, capture_output=True, text=True).stdout.strip())
    (fresh_site / "test-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(fresh_python), "install", "--quiet", "--no-deps",
                    str(wheel)], check=True, capture_output=True, text=True, timeout=300)

    where = subprocess.run([str(fresh_python), "-c", "import crdscope.probes.scheduler as m; print(m.__file__)"],
                           check=True, capture_output=True, text=True, cwd=tmp_path).stdout.strip()
    assert where.startswith(str(fresh_site)), where

    env = {**os.environ, "CRDSCOPE_LAB_HOME": str(tmp_path / "lab-home")}
    crdscope = str(fresh / "bin" / "crdscope")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([crdscope, *args], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)

    assert run("--help").returncode == 0
    if SHIPPED:  # the recorded demo reads from the wheel's own files (its replay: tests/e2e/test_demo_replay.py)
        shipped = subprocess.run([str(fresh_python), "-c", "from crdscope.tui.fleet_replay import read_demo, "
                                  "shipped_recordings; demo = read_demo(shipped_recordings()); "
                                  "print(' '.join(lab.name for lab in demo.labs), demo.recordings[0].path)"],
                                 capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert shipped.returncode == 0, shipped.stderr
        assert shipped.stdout.startswith("demo-126 demo-137 " + str(fresh_site)), shipped.stdout
    else:  # none shipped: one line saying so, no lab started
        replay = run("demo", "--replay")
        assert replay.returncode != 0 and replay.stderr.startswith("crdscope: no recording of the demo"), replay.stderr
        assert len(replay.stderr.strip().splitlines()) == 1 and "Traceback" not in replay.stdout, replay
    up = run("lab", "up")
    try:
        assert up.returncode == 0, up.stderr
        kubeconfig = run("lab", "kubeconfig").stdout.strip()
        version = run("probe", "version", "--json", "--kubeconfig", kubeconfig)
        assert version.returncode == 0, version.stderr
        sample = json.loads(version.stdout)
        assert sample["error"] is None and sample["git_version"].startswith("v1.")
    finally:
        down = run("lab", "down")
    assert down.returncode == 0, down.stderr
