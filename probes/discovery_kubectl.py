"""What kubectl lives through: its discovery disk cache, and its own timing of ``api-resources``.

kubectl keeps discovery in ``$KUBECACHEDIR`` (or ``~/.kube/cache``) under
``discovery/<host>``, where ``<host>`` is the kubeconfig's server without its
scheme and with every character outside ``[A-Za-z0-9_/.()]`` turned into ``_``
(client-go's ``computeDiscoverCacheDir``).  Each file is trusted for six hours
(ten minutes before kubectl 1.24).  On a cluster with thousands of CRDs the
cache is hundreds of files, and reading them back is the slow-cache symptom:
:func:`inspect_cache` measures it.  Everything here touches disks or processes,
so callers run it in a thread (:func:`inspect_cache`) or as a subprocess
(:func:`kubectl_timing`), never on the event loop.
"""

from __future__ import annotations

from crdscope.base.samples.discovery import CACHE_TTL_SECONDS, KubectlCache, KubectlTiming

import asyncio
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from crdscope.connection.cluster import Cluster

_UNSAFE = re.compile(r"[^\w/.()]", re.ASCII)
KUBECTL_TIMEOUT_SECONDS = 300.0


def cache_root() -> Path:
    """kubectl's cache directory: ``$KUBECACHEDIR`` or ``~/.kube/cache``."""
    override = os.environ.get("KUBECACHEDIR")
    return Path(override) if override else Path.home() / ".kube" / "cache"


def cache_dir_for(server: str, root: Path | None = None) -> Path:
    """``<root>/discovery/<host>`` for a kubeconfig ``server``, with kubectl's sanitising rule."""
    schemeless = server.replace("https://", "", 1).replace("http://", "", 1)
    return (root or cache_root()) / "discovery" / _UNSAFE.sub("_", schemeless)


def cache_signature(directory: Path) -> tuple[tuple[str, int, int], ...]:
    """(path, size, mtime) of every file: a cheap way to know the cache changed."""
    entries = []
    for folder, _, names in os.walk(directory):
        for name in names:
            try:
                info = os.stat(os.path.join(folder, name))
            except OSError:
                continue
            entries.append((os.path.join(folder, name), info.st_size, info.st_mtime_ns))
    return tuple(sorted(entries))


def inspect_cache(server: str, root: Path | None = None, *, time_reads: bool = True,
                  now: float | None = None) -> KubectlCache:
    """Count, size, age and (``time_reads``) read+parse time of the server's cache (blocking)."""
    directory = cache_dir_for(server, root)
    if not directory.is_dir():
        return KubectlCache(path=str(directory))
    now = time.time() if now is None else now
    files, total, mtimes = [], 0, []
    for path, size, mtime_ns in cache_signature(directory):
        files.append(path)
        total += size
        mtimes.append(mtime_ns / 1e9)
    try:
        age: float | None = now - (directory / "servergroups.json").stat().st_mtime
    except OSError:  # not written (yet), or being replaced by kubectl right now
        age = None
    read_seconds, unreadable = None, 0
    if time_reads:
        started = time.perf_counter()
        for path in files:
            try:
                with open(path, "rb") as handle:
                    json.loads(handle.read())
            except (OSError, ValueError):
                unreadable += 1
        read_seconds = time.perf_counter() - started
    return KubectlCache(
        path=str(directory), present=True, files=len(files), bytes=total,
        age_seconds=age, oldest_seconds=(now - min(mtimes)) if mtimes else None,
        expired=(age > CACHE_TTL_SECONDS) if age is not None else None,
        read_seconds=read_seconds, unreadable_files=unreadable,
    )


async def _run_kubectl(argv: list[str], env: dict[str, str],
                       timeout: float = KUBECTL_TIMEOUT_SECONDS) -> tuple[float, int, str, str]:
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(*argv, env=env, stdout=asyncio.subprocess.PIPE,
                                                   stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except (TimeoutError, asyncio.CancelledError):
        process.kill()  # never leave a kubectl behind
        await process.wait()
        raise
    return time.perf_counter() - started, process.returncode or 0, out.decode(errors="replace"), \
        err.decode(errors="replace")


def _kubectl_env(cluster: Cluster) -> dict[str, str]:
    env = dict(os.environ)
    if cluster.config.kubeconfig:
        env["KUBECONFIG"] = os.pathsep.join(cluster.config.kubeconfig)
    return env


def _api_resources(binary: str, cache: str, cluster: Cluster) -> list[str]:
    argv = [binary, f"--cache-dir={cache}", f"--context={cluster.context}", "api-resources", "--no-headers"]
    if cluster.context == "in-cluster":
        argv.remove(f"--context={cluster.context}")
    return argv


async def kubectl_cold_seconds(cluster: Cluster, kubectl: str, timeout: float) -> tuple[float | None, str | None]:
    """Seconds of one ``kubectl api-resources`` with an empty cache dir (what its next cold discovery
    costs), or (None, why not).  A run past ``timeout`` is killed and raises :class:`TimeoutError`
    (a cold discovery that slow is itself the answer)."""
    with tempfile.TemporaryDirectory(prefix="crdscope-kubectl-cache-") as cache:
        try:
            seconds, code, _, err = await _run_kubectl(_api_resources(kubectl, cache, cluster),
                                                       _kubectl_env(cluster), timeout)
        except OSError as exc:
            return None, f"cannot run kubectl: {exc.strerror or exc}"
    if code != 0:
        return None, f"kubectl api-resources failed: {_last_line(err)}"
    return seconds, None


async def kubectl_timing(cluster: Cluster, kubectl: str | None = None) -> KubectlTiming:
    """Time the real ``kubectl api-resources`` against ``cluster`` with a fresh cache dir.

    Cold: an empty temporary ``--cache-dir``; warm: the same command again (its
    HTTP and discovery caches filled); cached: ``--cached`` (disk cache only).
    Not part of the periodic probe: it runs a process and a full discovery.
    """
    binary = kubectl or shutil.which("kubectl")
    if not binary:
        return KubectlTiming(error="kubectl is not on PATH")
    env = _kubectl_env(cluster)
    with tempfile.TemporaryDirectory(prefix="crdscope-kubectl-cache-") as cache:
        base = _api_resources(binary, cache, cluster)
        try:
            cold, code, out, err = await _run_kubectl(base, env)
            if code != 0:
                return KubectlTiming(error=f"kubectl api-resources failed: {_last_line(err)}")
            warm, _, _, _ = await _run_kubectl(base, env)
            cached, _, _, _ = await _run_kubectl(base + ["--cached"], env)
        except TimeoutError:
            return KubectlTiming(error=f"kubectl api-resources took longer than {KUBECTL_TIMEOUT_SECONDS:.0f}s")
        except OSError as exc:
            return KubectlTiming(error=f"cannot run kubectl: {exc.strerror or exc}")
    return KubectlTiming(
        cold_seconds=cold, warm_seconds=warm, cached_seconds=cached,
        resources=sum(1 for line in out.splitlines() if line.strip()),
        throttling_messages=err.count("client-side throttling"),
    )


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"
