"""Labs for benchmarks: a fresh control plane loaded with a slice of a real CRD set.

Two kinds:

* :func:`fresh_lab` / :func:`loaded_lab`: a lab of one's own, torn down afterwards
  (the loader benchmark starts one per run);
* :func:`shared_lab`: one loaded lab kept across benchmarks of one ``python -m bench``
  process (discovery, overhead, UI latency and the /metrics scrape measure the same
  cluster), at most one at a time, because a lab with the whole AWS set holds about
  10 GB and this machine is shared.  :func:`release_shared` tears it down.

Labs are loaded with kubectl (the neutral reference), several ``apply`` processes at
once; Established is read from one paged CRD list, not with ``kubectl wait`` (which
watches each CRD behind kubectl's 5 requests per second).
"""

from __future__ import annotations

import atexit
import contextlib
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path
from collections.abc import Iterator

import httpx

from crdscope.lab.binaries import ensure_binaries
from crdscope.lab.controlplane import Lab, LabState, admin_tls
from crdscope.connection.credentials import parse_rfc3339
from crdscope.base.paths import cache_dir

from .common import SHARED_CRDS, BenchError, say

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
ADMIN_CONTEXT = "crdscope-lab"
RESTRICTED_CONTEXT = "crdscope-lab-restricted"
#: kubectl apply processes sent at once when loading a shared lab.
APPLY_PROCESSES = 4
ESTABLISHED_TIMEOUT_SECONDS = 1800.0
#: Resident memory an API server needs per CRD of the AWS set (measured: about 10 GB for 2,065).
GIB_PER_CRD = 0.005
MEMORY_WAIT_SECONDS = 1200.0
#: A freshly loaded API server keeps both cores busy for minutes (OpenAPI aggregation of every
#: new CRD); benchmarks on a shared lab wait this long at most for it to go idle.
IDLE_TIMEOUT_SECONDS = 600.0


def crd_dir(set_name: str, size: int | None) -> Path:
    """The first ``size`` CRD files (sorted) of a shared archive, unpacked once into the cache."""
    archive = SHARED_CRDS / f"{set_name}.tar.xz"
    if not archive.exists():
        raise SystemExit(f"bench: {archive} is absent (real CRD sets live beside the checkout)")
    target = cache_dir() / "bench-crds" / f"{set_name}-{size or 'all'}"
    stamp = target / ".complete"
    if stamp.exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "r:xz") as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile() and m.name.endswith(".yaml")),
                         key=lambda m: m.name)
        for member in members[:size] if size else members:
            (target / Path(member.name).name).write_bytes(tar.extractfile(member).read())
    stamp.write_text("")
    return target


def crd_files(directory: Path) -> list[Path]:
    """The CRD files of a directory made by :func:`crd_dir`."""
    return sorted(directory.glob("*.yaml"))


def kubectl(state: LabState, *args: str, timeout: float = 1800,
            input_text: str | None = None) -> subprocess.CompletedProcess:
    """The real kubectl against a lab (admin context); a failure is a :class:`BenchError`."""
    done = subprocess.run(["kubectl", f"--kubeconfig={state.kubeconfig}", *args], capture_output=True,
                          text=True, timeout=timeout, input=input_text)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
        raise BenchError(f"kubectl {' '.join(args[:3])} failed: {lines[-1]}")
    return done


def established_times(state: LabState) -> dict[str, float | None]:
    """Every CRD's name -> when its Established condition turned True (Unix seconds, whole
    seconds as the server stores them), None while it is not; read in pages of 100."""
    found: dict[str, float | None] = {}
    token = ""
    with httpx.Client(base_url=state.server, verify=admin_tls(state.pki_dir), timeout=300) as client:
        while True:
            params = {"limit": "100", **({"continue": token} if token else {})}
            response = client.get(CRD_PATH, params=params)
            response.raise_for_status()
            page = response.json()
            for item in page.get("items", []):
                when = None
                for condition in (item.get("status") or {}).get("conditions") or []:
                    if condition.get("type") == "Established" and condition.get("status") == "True":
                        when = parse_rfc3339(condition.get("lastTransitionTime") or "1970-01-01T00:00:00Z")
                found[item["metadata"]["name"]] = when
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                return found


def wait_established(state: LabState, expected: int, timeout: float = ESTABLISHED_TIMEOUT_SECONDS) -> None:
    """Return once at least ``expected`` CRDs are Established (polls one paged list)."""
    deadline = time.monotonic() + timeout
    while True:
        ready = sum(1 for when in established_times(state).values() if when is not None)
        if ready >= expected:
            return
        if time.monotonic() > deadline:
            raise BenchError(f"only {ready} of {expected} CRDs Established after {timeout:.0f}s")
        time.sleep(2)


def apply_and_wait(state: LabState, directory: Path) -> None:
    """Install a directory of CRDs with kubectl (the neutral reference) and wait until Established.

    The files go to :data:`APPLY_PROCESSES` ``kubectl apply --server-side`` processes at
    once (one kubectl applies one object at a time), so a lab of 2,065 CRDs loads in
    minutes rather than a quarter of an hour.
    """
    files = crd_files(directory)
    groups = [files[start::APPLY_PROCESSES] for start in range(APPLY_PROCESSES)]
    processes = [
        subprocess.Popen(["kubectl", f"--kubeconfig={state.kubeconfig}", f"--context={ADMIN_CONTEXT}", "apply",
                          "--server-side", *(f"-f={path}" for path in group)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for group in groups if group
    ]
    failures = []
    for process in processes:
        _, err = process.communicate(timeout=ESTABLISHED_TIMEOUT_SECONDS)
        if process.returncode != 0:
            failures.append(err.strip().splitlines()[-1] if err.strip() else f"exit {process.returncode}")
    if failures:
        raise BenchError(f"kubectl apply failed: {failures[0]}")
    wait_established(state, len(files))


def wait_until_idle(state: LabState, timeout: float = IDLE_TIMEOUT_SECONDS) -> float:
    """Wait until the lab's API server is idle (:func:`crdscope.costmodel.measure.wait_until_idle`, the
    one rule calibration and ``estimate --measure`` share); returns the last share, goes on after ``timeout``."""
    from crdscope.costmodel.measure import IDLE_CORE_FRACTION, wait_until_idle as wait_for_idle_pid

    share = wait_for_idle_pid(state.components["apiserver"].pid, timeout)
    if share >= IDLE_CORE_FRACTION:
        say(f"the API server still uses {share:.0%} of a core after {timeout:.0f}s; going on")
    return share


def wait_for_memory(gib: float, timeout: float = MEMORY_WAIT_SECONDS) -> bool:
    """Wait (up to ``timeout``) until the machine has ``gib`` of memory available; False if it never did.

    A lab with thousands of CRDs takes gigabytes; started beside another engineer's big
    lab it would get one of them killed by the kernel.
    """
    deadline = time.monotonic() + timeout
    told = False
    while True:
        available = _available_gib()
        if available is None or available >= gib:
            return True
        if time.monotonic() > deadline:
            say(f"only {available:.1f} GiB available (want {gib:.1f}); going on anyway")
            return False
        if not told:
            say(f"waiting for {gib:.1f} GiB of memory ({available:.1f} available)")
            told = True
        time.sleep(10)


def _available_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024 / 1024
    except (OSError, ValueError):
        pass
    return None


def memory_for(size: int | None, total: int) -> float:
    """GiB a lab holding ``size`` CRDs (None: ``total``) needs, with 2 GiB to spare."""
    return 2.0 + GIB_PER_CRD * (size or total)


@contextlib.contextmanager
def fresh_lab(kubernetes: str | None = None) -> Iterator[LabState]:
    """A lab of its own (of the ``kubernetes`` version, default: the lab's), torn down afterwards."""
    with tempfile.TemporaryDirectory(prefix="crdscope-bench-") as home:
        lab = Lab(Path(home))
        state = lab.up(ensure_binaries(kubernetes=kubernetes))
        try:
            yield state
        finally:
            lab.down()


@contextlib.contextmanager
def loaded_lab(set_name: str, size: int | None) -> Iterator[LabState]:
    """A fresh lab holding ``size`` CRDs of ``set_name`` (all Established)."""
    directory = crd_dir(set_name, size)
    wait_for_memory(memory_for(size, len(crd_files(directory))))
    with fresh_lab() as state:
        apply_and_wait(state, directory)
        yield state


class _Shared:
    """The one shared lab of this process: its key, its state and how to tear it down."""

    key: tuple[str, int | None] | None = None
    state: LabState | None = None
    stack: contextlib.ExitStack | None = None


def shared_lab(set_name: str, size: int | None) -> LabState:
    """A lab holding ``size`` CRDs of ``set_name``, kept for the next benchmark that asks for the
    same; asking for another replaces it.  Benchmarks on it must leave it as they found it."""
    key = (set_name, size)
    if _Shared.key == key and _Shared.state is not None:
        return _Shared.state
    release_shared()
    say(f"loading a lab with {size or 'all'} CRDs of {set_name}")
    stack = contextlib.ExitStack()
    try:
        state = stack.enter_context(loaded_lab(set_name, size))
        wait_until_idle(state)
    except BaseException:
        stack.close()
        raise
    _Shared.key, _Shared.state, _Shared.stack = key, state, stack
    return state


def shared_size() -> int | None | str:
    """The size the shared lab holds ("" when none is up)."""
    return _Shared.key[1] if _Shared.key else ""


def sizes_starting_with_shared(sizes: tuple[int | None, ...]) -> list[int | None]:
    """``sizes`` with the one the shared lab already holds first (saves loading a lab twice)."""
    held = shared_size()
    return sorted(sizes, key=lambda size: size != held)


def each_shared_lab(set_name: str, sizes: tuple[int | None, ...],
                    benchmark: str) -> Iterator[tuple[int | None, LabState, int]]:
    """(size, shared lab, CRDs in it) for every size, the one already up first."""
    for size in sizes_starting_with_shared(sizes):
        state = shared_lab(set_name, size)
        say(f"{benchmark} on {size or 'all'} CRDs")
        yield size, state, len(crd_files(crd_dir(set_name, size)))


def release_shared() -> None:
    """Tear the shared lab down (if any)."""
    stack = _Shared.stack
    _Shared.key = _Shared.state = _Shared.stack = None
    if stack is not None:
        stack.close()


atexit.register(release_shared)
