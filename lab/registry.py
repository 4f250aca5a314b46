"""The lab's package registry: open by default, or asking for credentials (``--registry-auth``).

Open (the default: the demo and every Crossplane test push and pull without credentials):
go-containerregistry's ``crane registry serve`` on loopback, blobs in the run directory, built with
Crossplane's CLI (:mod:`toolchain.crossplane`).

Authenticated: the Docker Distribution registry (Debian's ``docker-registry``, distribution v2.8,
the server most private registries run or imitate) with its htpasswd authentication, the basic
challenge ``Basic realm="crdscope-lab"`` on every request without the lab's credentials.  crane's
registry has no authentication at all, and a front of our own would prove only itself; Debian's
package is a real registry with nothing to build.  The lab generates one user (``crdscope``) and a
random password, hashed with bcrypt by Apache's ``htpasswd`` (``apache2-utils``: the only hash the
registry accepts; the password goes in on stdin, never on a command line), and writes:

- ``registry-auth/config.json``: Docker's format, ``auths`` for ``127.0.0.1:PORT`` (what
  ``crdscope ... --registry-config FILE`` reads, and what the lab's own pushes use);
- the Secret ``crossplane-system/crdscope-lab-registry`` (type ``kubernetes.io/dockerconfigjson``,
  the same file): what a Provider's ``packagePullSecrets`` or an ImageConfig's ``pullSecretRef`` names
  (:func:`pull_secret`; created by :func:`lab.crossplane.start` once the namespace exists).

The folder is readable by its owner only.  Neither the password nor the file's content is printed,
logged or passed on a command line.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Callable

from crdscope.base.errors import LabError
from crdscope.base.labrecord import Component, pid_alive

from .processes import free_port, spawn, tail, wait_http

if TYPE_CHECKING:
    from crdscope.toolchain.crossplane import CrossplaneBinaries

    from .controlplane import Lab, LabState

#: Debian's Docker Distribution registry and Apache's htpasswd (lab/system-deps.sh installs both).
REGISTRY_BINARY = "docker-registry"
HTPASSWD_BINARY = "htpasswd"
USER = "crdscope"
REALM = "crdscope-lab"
#: The docker-registry Secret in Crossplane's namespace (and the ImageConfig naming it).
PULL_SECRET = "crdscope-lab-registry"
AUTH_FOLDER = "registry-auth"
READY_SECONDS = 20.0
ATTEMPTS = 3


def start_registry(lab: Lab, state: LabState, binaries: CrossplaneBinaries, directory: Path,
                   say: Callable[[str], None], *, authenticated: bool = False) -> None:
    """The lab's registry on a free loopback port (kept when one already runs: said if its kind differs)."""
    existing = state.components.get("registry")
    if existing is not None and pid_alive(existing.pid):
        if authenticated != bool(state.registry_config):
            kind = "asks for credentials" if state.registry_config else "is open"
            say(f"the lab's registry already runs and {kind}: kept as it is (`lab down` and up again to change it)")
        return
    tools = check_tools() if authenticated else None
    (directory / "registry").mkdir(parents=True, exist_ok=True)
    for _attempt in range(ATTEMPTS):
        port = free_port()
        if tools is not None:
            argv = [tools[0], "serve", str(_write_authenticated(directory, port, tools[1]))]
        else:
            argv = [str(binaries.crane), "registry", "serve", "--address", f"127.0.0.1:{port}",
                    "--disk", str(directory / "registry")]
        registry = Component(name="registry", role="registry", port=port, argv=argv,
                             log=str(Path(state.run_dir) / "logs" / "registry.log"))
        state.components["registry"] = registry
        state.registry_config = str(directory / AUTH_FOLDER / "config.json") if tools is not None else ""
        spawn(registry)
        lab.save(state)
        if wait_http(registry, READY_SECONDS):
            say(f"registry ready at 127.0.0.1:{port}" + (
                f" (asks for credentials: {state.registry_config}; Secret {PULL_SECRET} in crossplane-system)"
                if tools is not None else ""))
            return
    raise LabError(f"the registry did not start; last lines of {registry.log}:", detail=tail(registry.log))


def check_tools() -> tuple[str, str]:
    """``docker-registry`` and ``htpasswd``, or a one-line error saying which Debian packages hold them."""
    registry, htpasswd = shutil.which(REGISTRY_BINARY), shutil.which(HTPASSWD_BINARY)
    if registry is None or htpasswd is None:
        missing = " and ".join(name for name, found in (("docker-registry", registry), ("apache2-utils", htpasswd))
                               if found is None)
        raise LabError(f"--registry-auth runs Debian's docker-registry with htpasswd: install {missing} "
                       "(`make system-deps` does)", exit_code=2)
    return registry, htpasswd


def _write_authenticated(directory: Path, port: int, htpasswd: str) -> Path:
    """A fresh user and password: the htpasswd file, the registry's configuration and Docker's
    ``config.json`` for ``127.0.0.1:PORT``; the configuration's path."""
    folder = directory / AUTH_FOLDER
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    password = secrets.token_urlsafe(24)
    done = subprocess.run([htpasswd, "-B", "-i", "-c", str(folder / "htpasswd"), USER], input=password,
                          capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise LabError(f"htpasswd failed (exit {done.returncode}): {' '.join(done.stderr.split())[:200]}")
    configuration = folder / "registry.yml"
    configuration.write_text(json.dumps({  # YAML is a superset of JSON
        "version": 0.1,
        "log": {"level": "info", "fields": {"service": "registry"}},
        "storage": {"filesystem": {"rootdirectory": str(directory / "registry")}, "delete": {"enabled": True}},
        "http": {"addr": f"127.0.0.1:{port}", "headers": {"X-Content-Type-Options": ["nosniff"]}},
        "auth": {"htpasswd": {"realm": REALM, "path": str(folder / "htpasswd")}},
    }, indent=1))
    _write_private(folder / "config.json", json.dumps(docker_config(f"127.0.0.1:{port}", USER, password)))
    return configuration


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only, from its first byte."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)


def docker_config(host: str, user: str, password: str) -> dict[str, Any]:
    """Docker's ``config.json`` holding one registry's credentials (as ``docker login`` writes it)."""
    return {"auths": {host: {"auth": base64.b64encode(f"{user}:{password}".encode()).decode()}}}


def pull_secret(state: LabState, namespace: str) -> dict[str, Any] | None:
    """The docker-registry Secret of the lab's authenticated registry in ``namespace`` (None: the
    registry is open)."""
    if not state.registry_config:
        return None
    content = Path(state.registry_config).read_bytes()
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
            "metadata": {"name": PULL_SECRET, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "crdscope"}},
            "data": {".dockerconfigjson": base64.b64encode(content).decode()}}
