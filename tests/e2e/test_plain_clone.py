"""`make demo CROSSPLANE=1` from a plain clone, with no ../shared beside it, against the real lab.

A user's clone has only crdscope: the demo's provider is then the family crdscope generates
(``tui.launch.GENERATED_PROVIDER``), built by the real crank, pushed to the lab's registry and
installed through the lab's real Crossplane. Here: ``git clone`` of this checkout (its HEAD:
uncommitted edits are not in a clone) into a folder of its own; a venv for the clone where the
Makefile makes one, without downloading its dependencies (the test venv's third-party packages
through a ``.pth`` line, as tests/e2e/test_wheel.py does, and the clone installed editable, as
``make venv`` does, so every ``crdscope`` module is the clone's); then ``make demo CROSSPLANE=1``
typed into a shell in tmux, until the monitor says the install finished and its inventory panel
shows the family's CRDs Established; kubectl is the reference for what Crossplane did.

The lab and the package cache are the test's own (``CRDSCOPE_LAB_HOME``; an ``XDG_CACHE_HOME``
linking to the built binaries only), so the packages are built here, as on a first run.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import time
import venv
from pathlib import Path

import pytest

from crdscope.base.paths import cache_dir
from crdscope.tui.launch import DEFAULT_PROVIDER
from tests.helpers import condition_true, established, wait_for

ROOT = Path(__file__).resolve().parents[2]
SESSION = "demo"
#: Measured on 2 shared cores: the generated family's 800 MRDs take about as long as the GCP set's
#: (5 minutes), its build and push well under a minute, the lab and Crossplane a minute.
INSTALL_TIMEOUT_SECONDS = 1500

pytestmark = [pytest.mark.lab, pytest.mark.timeout(INSTALL_TIMEOUT_SECONDS + 300)]


def run(*argv: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=timeout)
    assert done.returncode == 0, f"{shlex.join(map(str, argv))} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture
def plain_clone(tmp_path: Path) -> Path:
    """A clone of the checkout with nothing beside it, and its venv (``.venv``, as the Makefile names it)."""
    from crdscope.toolchain import crossplane as toolchain_crossplane

    if toolchain_crossplane.cached_binaries() is None:
        pytest.skip("Crossplane is not built (make lab-binaries)")
    return make_plain_clone(tmp_path)


def make_plain_clone(tmp_path: Path) -> Path:
    """``git clone`` of this checkout's HEAD into ``tmp_path/plain``, alone there, with its venv made offline."""
    if not shutil.which("tmux"):
        pytest.skip("tmux is absent (make system-deps)")
    clone = tmp_path / "plain"
    run("git", "clone", "--quiet", ROOT, clone)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain"]  # no ../shared beside it
    fresh = clone / ".venv"
    venv.EnvBuilder(with_pip=False).create(fresh)
    python = fresh / "bin" / "python"
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").stdout.strip()
    # The test venv's packages (not its .pth files: the editable install of this checkout stays out).
    (Path(site) / "test-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps",
        "-e", clone, cwd=tmp_path)
    where = run(python, "-c", "import crdscope.tui.launch as m; print(m.__file__)", cwd=tmp_path).stdout.strip()
    assert where.startswith(str(clone)), where
    (fresh / ".installed-stamp").touch()  # the Makefile's venv target: done (offline, above)
    return clone


def tmux(socket: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tmux", "-S", str(socket), *args], capture_output=True, text=True, timeout=30)


def screen(socket: Path, history: bool = False) -> str:
    return tmux(socket, "capture-pane", "-p", "-t", SESSION, *(["-S", "-"] if history else [])).stdout


def test_make_demo_crossplane_installs_the_generated_family_from_a_plain_clone(plain_clone: Path, tmp_path: Path):
    cache = tmp_path / "cache"
    (cache / "crdscope").mkdir(parents=True)
    for built in ("controlplane", "crossplane"):  # the binaries, not the package cache
        (cache / "crdscope" / built).symlink_to(cache_dir() / built)
    env = {"XDG_CACHE_HOME": str(cache), "CRDSCOPE_LAB_HOME": str(tmp_path / "lab-home"),
           **{k: os.environ[k] for k in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "KUBECONFIG")}}
    env_all = {**os.environ, **env}
    crdscope = plain_clone / ".venv" / "bin" / "crdscope"
    socket = tmp_path / "tmux.sock"
    started = time.monotonic()
    try:
        done = tmux(socket, "new-session", "-d", "-x", "200", "-y", "50", "-s", SESSION, "-c", str(plain_clone),
                    *(f"-e{k}={v}" for k, v in env.items()), "bash --norc --noprofile")
        assert done.returncode == 0, done.stderr
        tmux(socket, "send-keys", "-t", SESSION, "make demo CROSSPLANE=1", "Enter")

        def finished() -> str | None:
            text = screen(socket)
            if "install through Crossplane done" in text:
                return "done"
            if "the install stopped" in text or re.search(r"stage \d+ not done after", text):
                pytest.fail(f"the install failed:\n{text}")
            if re.search(r"make: \*\*\*|^crdscope: ", text, re.MULTILINE):
                pytest.fail(f"the demo did not start:\n{text}")
            return None

        wait_for(finished, timeout=INSTALL_TIMEOUT_SECONDS, interval=2, message="the install's last line")
        installed_after = time.monotonic() - started

        def inventory_established() -> int:
            # The inventory panel's row of a member: "Provider/provider-synthetic-NAME  CRDs  Established ...".
            rows = re.findall(r"Provider/provider-synthetic-\S*\s+(\d+)\s+(\d+)", screen(socket))
            return sum(int(established) for _, established in rows)

        on_screen = wait_for(inventory_established, timeout=60, message="Established CRDs in the inventory panel")
        tmux(socket, "send-keys", "-t", SESSION, "q")
        wait_for(lambda: "the lab is still running" in screen(socket, history=True), timeout=60,
                 message="the monitor to quit and say the lab is up")
        said = screen(socket, history=True)

        kubeconfig = run(crdscope, "lab", "kubeconfig", env=env_all).stdout.strip()

        def kubectl(*args: str) -> list[dict]:
            return json.loads(run("kubectl", "--kubeconfig", kubeconfig, *args, "-o", "json").stdout)["items"]

        providers = kubectl("get", "providers")
        mrds = kubectl("get", "managedresourcedefinitions")
        [mrap] = kubectl("get", "managedresourceactivationpolicies")
        crds = kubectl("get", "crds")
    finally:
        tmux(socket, "kill-server")
        with contextlib.suppress(Exception):
            subprocess.run([str(crdscope), "lab", "down"], env=env_all, capture_output=True, timeout=300)

    # Before the monitor opened: the default, said in one line, and the packages built here.
    assert f"no ../shared/crds/{DEFAULT_PROVIDER} beside the checkout" in said, said
    built = re.search(r"built (\d+) packages of (\d+) CRDs in (\d+)s", said)
    assert built, said
    packages, crd_count = int(built.group(1)), int(built.group(2))
    print(f"\nfirst run: {packages} packages of {crd_count} CRDs built in {built.group(3)}s; "
          f"install done {installed_after:.0f}s after `make demo`")

    # kubectl's view: a provider family (upstream's names), every Provider Installed, every CRD an MRD,
    # and exactly the MRAP's kinds Established as CRDs, at most a few hundred.
    names = {p["metadata"]["name"] for p in providers}
    assert len(names) == packages and "provider-family-synthetic" in names
    assert all(name.startswith("provider-synthetic-") for name in names - {"provider-family-synthetic"})
    assert all(condition_true(p, "Installed") for p in providers)
    assert len(mrds) == crd_count
    patterns = mrap["spec"]["activate"]
    activated = {m["metadata"]["name"] for m in mrds if any(fnmatch.fnmatch(m["metadata"]["name"], p) for p in patterns)}
    ready = {c["metadata"]["name"] for c in crds if established(c)}
    assert 0 < len(activated) <= 300 and activated < {m["metadata"]["name"] for m in mrds}
    assert ready & {m["metadata"]["name"] for m in mrds} == activated
    assert on_screen <= len(activated)  # what the panel counted had been Established
