"""Go builds: how crdscope compiles its tools from Go modules (no binary is downloaded).

The lab's kube-apiserver and etcd (:mod:`lab.binaries`) and Crossplane's core, CLI and crane
(:mod:`toolchain.crossplane`) are built the same way: the machine's Go, static binaries, modules
through the Go module proxy, progress reported every 5 s.  A release that needs a newer Go than
the machine's (Kubernetes 1.38 needs 1.27) is built with :data:`NEWER_TOOLCHAIN`, which the go
command itself fetches from the Go module proxy (``golang.org/toolchain``), saying so.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from crdscope.base.errors import LabError


#: The one Go toolchain newer than the machine's that a build may use (the environment's notes name it):
#: ``GOTOOLCHAIN=go1.27.3`` makes the go command fetch it from the Go module proxy (about 76 MB, once;
#: kept in the module cache with the other modules).
NEWER_TOOLCHAIN = "go1.27.3"


def go_env() -> dict[str, str]:
    """The environment of every lab build: the machine's Go only, static binaries."""
    return {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod -buildvcs=false"}


def _resolve_modules(module_dir: Path, packages: list[str], env: dict[str, str], say: Callable[[str], None],
                     started: float) -> tuple[int, int]:
    """List the packages to build, downloading every module they need; returns (packages, modules downloaded)."""
    # The package list (stdout, ~100 KB for kube-apiserver) goes to a file: read after stderr
    # from a pipe, it would fill the pipe and stall `go list` while we wait on stderr.
    downloaded, last_report, errors = 0, 0.0, []
    with tempfile.TemporaryFile(mode="w+") as listing:
        process = subprocess.Popen(["go", "list", "-deps", *packages], cwd=module_dir, env=env,
                                   stdout=listing, stderr=subprocess.PIPE, text=True)
        assert process.stderr is not None
        for line in process.stderr:  # the download lines, as they come
            if line.startswith("go: downloading"):
                downloaded += 1
                now = time.monotonic()
                if now - last_report >= 5:
                    last_report = now
                    say(f"  [{now - started:4.0f}s] resolving: {downloaded} modules downloaded")
            elif line.strip():
                errors.append(line.strip())
        returncode = process.wait()
        listing.seek(0)
        listed = listing.read().split()
    if returncode != 0:
        raise LabError(f"go list failed: {'; '.join(errors[-3:]) or 'no output'}")
    return len(listed), downloaded


def go_build(module_dir: Path, packages: list[str], target: Path, *, ldflags: str,
             say: Callable[[str], None], env: dict[str, str] | None = None) -> dict[str, float]:
    """``go build`` ``packages`` of ``module_dir`` into ``target``, reporting progress every 5 s.

    Modules are downloaded while resolving (``go list -deps``), so that phase reports them;
    the compile phase reports packages compiled out of the total.
    """
    env = env or go_env()
    started = time.monotonic()
    total, downloaded = _resolve_modules(module_dir, packages, env, say, started)
    say(f"  [{time.monotonic() - started:4.0f}s] {downloaded} modules downloaded, {total} packages to build")
    argv = ["go", "build", "-v", "-trimpath", "-ldflags", ldflags, "-o", str(target) + os.sep, *packages]
    process = subprocess.Popen(argv, cwd=module_dir, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    compiled, last_report, errors = 0, 0.0, []
    assert process.stderr is not None
    for line in process.stderr:
        line = line.rstrip()
        if line.startswith("go: downloading"):
            downloaded += 1
        elif not line or line.startswith(("#", " ")) or ":" in line:
            errors.append(line)
            continue
        else:
            compiled += 1
        now = time.monotonic()
        if now - last_report >= 5:
            last_report = now
            say(f"  [{now - started:4.0f}s] {downloaded} modules downloaded, {compiled}/{total} packages compiled")
    if process.wait() != 0:
        tail = "; ".join(e for e in errors[-5:] if e)
        raise LabError(f"go build failed: {tail or 'see output above'}")
    return {"seconds": round(time.monotonic() - started, 1), "modules_downloaded": downloaded}


def go_version(env: dict[str, str] | None = None) -> str:
    """The Go a build's environment runs (``go1.26.8``; the machine's by default), recorded with each build."""
    done = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=False, env=env)
    return done.stdout.strip()


def version_key(version: str) -> tuple[int, ...]:
    """``go1.26.8``, ``1.27.0`` and ``1.27`` as comparable numbers (``1.27`` is ``1.27.0``)."""
    numbers = [int(n) for n in re.findall(r"\d+", version.split("-")[0])[:3]]
    return tuple(numbers + [0] * (3 - len(numbers)))


def toolchain_for(required: str, env: dict[str, str]) -> tuple[dict[str, str], str]:
    """The environment that builds a module whose ``go`` line is ``required``, and a line saying why
    when it is not the machine's Go (empty otherwise); a one-line error when even
    :data:`NEWER_TOOLCHAIN` is too old."""
    local = go_version(env)
    if not required or version_key(required) <= version_key(local):
        return env, ""
    if version_key(required) > version_key(NEWER_TOOLCHAIN):
        raise LabError(f"needs Go {required}: newer than the machine's {local} and than {NEWER_TOOLCHAIN}")
    return ({**env, "GOTOOLCHAIN": NEWER_TOOLCHAIN},
            f"needs Go {required} (its go.mod) and the machine has {local}: building with "
            f"GOTOOLCHAIN={NEWER_TOOLCHAIN}, which the go command fetches from the Go module proxy "
            "(about 76 MB, once; kept in the module cache)")
