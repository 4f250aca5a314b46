"""Benchmark: a provider installed through real Crossplane v2, beside ``crdscope load`` and kubectl.

``python -m bench crossplane [--kubernetes 1.37,1.26] [--installers LIST] [--size N] [--tenth-every K]``:
per run a fresh lab (each listed minor in turn), the AWS set (``../shared/crds/provider-aws.tar.xz``;
``--size N``: its first N CRDs) installed by one installer:

- ``kubectl``: ``kubectl apply --server-side`` of every file (four processes at once, as the other
  benchmarks do), the neutral reference;
- ``load``: ``crdscope load DIR`` at its default pace;
- ``monolith``: one provider package of every CRD (no ``safe-start``), built and pushed by
  ``crdscope package``'s code to the lab's registry, installed as one Provider through real Crossplane
  with its default MRAP (``*``, as upstream installs it): every MRD becomes a CRD;
- ``family``: the same CRDs as a provider family (``provider-family-aws`` and one package per service,
  each depending on it), every Provider applied at once;
- ``mrap-tenth``: the monolith with ``safe-start`` and no default MRAP, so its MRDs stay inactive; then
  one MRAP naming every tenth CRD (by sorted name): what activating a tenth of the kinds costs, against
  the monolith that activates them all.

Crossplane runs only in the Crossplane runs' labs (its core CRDs are there before the clock starts).
The clock starts when the installer starts (for Crossplane: when the Provider objects, or the MRAP, are
applied; building and pushing the packages come before and are reported apart) and stops at the last
``Established`` transition of the set's CRDs (their ``lastTransitionTime``: the benchmark polls only a
one-item LIST while waiting, so its own reads stay out of the figures).

Per run: seconds to all Established; the API server's CPU seconds over the install and Crossplane's;
RSS per CRD fitted over the install and RSS once idle again (``versions.Sampler``: ``/metrics`` and a
one-item LIST every 5 s, a latency canary every second, the ``/openapi/v3`` index every 2 s); the
aggregated discovery document (``GET /apis``) every 5 s: its peak seconds and its size at the end;
the OpenAPI v3 publication lag (p95, max).  ``mrap-tenth`` adds the RSS with every MRD inactive and
the MiB each activated CRD added.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from collections.abc import Callable

import httpx

from crdscope.base.crossplane import becomes_mrd
from crdscope.lab.binaries import ensure_binaries
from crdscope.lab.controlplane import Lab, LabState, admin_tls
from crdscope.connection.discovery_docs import ACCEPT_AGGREGATED

from .common import BENCH_DIR, BenchError, Options, Result, isolate_environment, process_cpu_seconds, say
from .discovery import crdscope_command
from .labs import apply_and_wait, crd_files, established_times, memory_for, wait_for_memory, wait_until_idle
from .versions import SET, Sampler, _percentile, _summarise, _v3_lags, first_crds, unpack_whole_set

INSTALLERS = ("kubectl", "load", "monolith", "family", "mrap-tenth")
CROSSPLANE_INSTALLERS = ("monolith", "family", "mrap-tenth")
CRD_LIST = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
MRD_LIST = "/apis/apiextensions.crossplane.io/v1alpha1/managedresourcedefinitions"
DISCOVERY_SECONDS = 5.0
WAIT_POLL_SECONDS = 2.0
INSTALL_TIMEOUT_SECONDS = 3 * 3600.0
TENTH_EVERY = 10
T = TypeVar("T")


def crd_names(directory: Path) -> list[str]:
    """The set's CRD names: files are named ``<group>_<plural>.yaml`` (bench.versions.unpack_whole_set)."""
    names = []
    for path in crd_files(directory):
        group, _, plural = path.stem.partition("_")
        names.append(f"{plural}.{group}")
    return sorted(names)


def _client(state: LabState, timeout: float = 60) -> httpx.Client:
    return httpx.Client(base_url=state.server, verify=admin_tls(state.pki_dir), timeout=timeout)


def count_of(state: LabState, path: str) -> int:
    """Objects of a list, from a one-item LIST (``remainingItemCount`` + 1): cheap while the set grows."""
    with _client(state) as client:
        response = client.get(path, params={"limit": "1"})
        if response.status_code == 404:
            return 0
        response.raise_for_status()
        page = response.json()
    return len(page.get("items") or []) + int((page.get("metadata") or {}).get("remainingItemCount") or 0)


def established_at(state: LabState, names: set[str]) -> dict[str, float | None]:
    """Each of ``names`` that exists: when it became Established (None: not yet)."""
    return {name: when for name, when in established_times(state).items() if name in names}


#: Polls in a row that may fail to connect before the run is given up (an API server restarting
#: under the install is seen in its logs, which a failed run keeps).
POLL_FAILURES_ALLOWED = 5


def polled(read: Callable[[], T]) -> T:
    """``read()``, asked again after a transport failure (a connection the busy server dropped),
    up to :data:`POLL_FAILURES_ALLOWED` times in a row."""
    for attempt in range(POLL_FAILURES_ALLOWED + 1):
        try:
            return read()
        except httpx.TransportError as exc:
            if attempt == POLL_FAILURES_ALLOWED:
                raise
            say(f"a poll failed ({type(exc).__name__}: {exc}); asking again")
            time.sleep(WAIT_POLL_SECONDS)  # the poll's cadence
    raise AssertionError("unreachable")


def wait_all_established(state: LabState, names: set[str], baseline: int, deadline: float) -> float:
    """Wait until every one of ``names`` is Established; the wall-clock time of the last transition.

    While CRDs are still being created only a one-item LIST is polled (``baseline`` CRDs were there
    before); the whole list is read once the count is complete, and again until all are Established.
    """
    while (created := polled(lambda: count_of(state, CRD_LIST))) < baseline + len(names):
        if time.monotonic() > deadline:
            raise BenchError(f"only {created - baseline} of {len(names)} CRDs created in time")
        time.sleep(WAIT_POLL_SECONDS)
    while True:
        times = polled(lambda: established_at(state, names))
        if len(times) == len(names) and all(when is not None for when in times.values()):
            return max(when for when in times.values() if when is not None)
        if time.monotonic() > deadline:
            ready = sum(1 for when in times.values() if when is not None)
            raise BenchError(f"only {ready} of {len(names)} CRDs Established in time")
        time.sleep(WAIT_POLL_SECONDS * 5)


@dataclass
class DiscoverySampler:
    """The aggregated discovery document every few seconds, as a client starting up would fetch it."""

    state: LabState
    stop: threading.Event = field(default_factory=threading.Event)
    seconds: list[float] = field(default_factory=list)
    last_bytes: int = 0
    aggregated: bool | None = None
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def finish(self) -> None:
        self.stop.set()
        if self.thread:
            self.thread.join(timeout=120)

    def _run(self) -> None:
        with _client(self.state, 120) as client:
            while not self.stop.wait(DISCOVERY_SECONDS):
                started = time.perf_counter()
                try:
                    response = client.get("/apis", headers={"Accept": ACCEPT_AGGREGATED})
                    body = response.content
                except httpx.HTTPError:
                    continue
                if response.status_code == 200:
                    self.seconds.append(time.perf_counter() - started)
                    self.last_bytes = len(body)
                    self.aggregated = "apidiscovery" in response.headers.get("content-type", "")


def rss_mib(pid: int) -> float:
    """The process's resident memory (MiB) from /proc: no request to the server."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise BenchError(f"no VmRSS for pid {pid}")


# --------------------------------------------------------------------------- installers


def _apply(state: LabState, documents: list[dict[str, Any]]) -> None:
    done = subprocess.run(["kubectl", f"--kubeconfig={state.kubeconfig}", f"--context={state.admin_context}",
                           "apply", "-f", "-"], input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                   "items": documents}),
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise BenchError(f"kubectl apply failed: {done.stderr.strip().splitlines()[-1:]}")


def push_packages(state: LabState, directory: Path, *, family: bool, safe_start: bool, work: Path) -> list[Any]:
    """Build and push the set's packages to the lab's registry (what ``crdscope package --push`` does)."""
    from crdscope.loader.package import build_packages
    from crdscope.loader.sources import open_source

    registry = f"127.0.0.1:{state.components['registry'].port}"
    run = build_packages(open_source(str(directory)), name="provider-aws", family=family, safe_start=safe_start,
                         push=True, registry=registry, output=work, say=lambda line: None)
    return run.packages


def providers_of(packages: list[Any]) -> list[dict[str, Any]]:
    """One Provider object per package (dependencies are resolved by Crossplane, already applied here)."""
    return [{"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider", "metadata": {"name": p.plan.name},
             "spec": {"package": p.reference}} for p in packages]


def tenth(names: list[str], every: int) -> list[str]:
    """Every ``every``-th name of the sorted set: a tenth of the kinds, spread over every service."""
    return names[::every]


# --------------------------------------------------------------------------- one run


def measure_run(minor: str, installer: str, directory: Path, names: list[str], every: int) -> dict[str, Any]:
    """Install the set with ``installer`` into a fresh lab of ``minor``; its figures."""
    binaries = ensure_binaries(kubernetes=minor, progress=say)
    figures: dict[str, Any] = {"installer": installer}
    with tempfile.TemporaryDirectory(prefix="crdscope-bench-xp-") as home:
        lab = Lab(Path(home))
        state = lab.up(binaries, say=say)
        figures["kubernetes"] = state.kubernetes_version
        sampler = Sampler(state, Path(home))
        discovery = DiscoverySampler(state)
        try:
            if installer in CROSSPLANE_INSTALLERS:
                from crdscope.lab.crossplane import start
                from crdscope.toolchain.crossplane import crossplane_binaries

                xp = crossplane_binaries(progress=say)
                start(lab, state, xp, activations=[] if installer == "mrap-tenth" else ["*"], say=say)
                state = lab.require()
                figures["crossplane"] = xp.version
            expected = set(names)
            work = Path(home) / "packages"
            packages: list[Any] = []
            if installer in CROSSPLANE_INSTALLERS:
                started = time.monotonic()
                packages = push_packages(state, directory, family=installer == "family",
                                         safe_start=installer == "mrap-tenth", work=work)
                figures["packages"] = len(packages)
                figures["package_build_push_s"] = round(time.monotonic() - started, 1)
            if installer == "mrap-tenth":
                # ProviderConfig kinds stay CRDs on Crossplane v2.4: the MRDs (and a tenth of them) are the rest.
                mrd_names = [name for name in names if becomes_mrd(name)]
                _apply(state, providers_of(packages))
                _wait_count(state, MRD_LIST, len(mrd_names), "MRDs")
                wait_until_idle(state)
                apiserver = state.components["apiserver"].pid
                figures["rss_inactive_mrds_mib"] = round(rss_mib(apiserver))
                figures["crds_before_mrap"] = count_of(state, CRD_LIST)
                expected = set(tenth(mrd_names, every))
                figures["activated"] = len(expected)
            baseline = count_of(state, CRD_LIST)
            wait_until_idle(state)
            apiserver = state.components["apiserver"].pid
            rss_before = rss_mib(apiserver)
            figures["rss_before_mib"] = round(rss_before)
            sampler.start()
            discovery.start()
            time.sleep(10)  # the samplers' first points, before the first CRD of the set
            crossplane_pid = state.components["crossplane"].pid if "crossplane" in state.components else None
            cpu_before = process_cpu_seconds(apiserver)
            xp_before = process_cpu_seconds(crossplane_pid) if crossplane_pid else None
            wall_started = time.time()
            deadline = time.monotonic() + INSTALL_TIMEOUT_SECONDS
            _install(installer, state, directory, packages, expected)
            last = wait_all_established(state, expected, baseline, deadline)
            figures["seconds_to_established"] = round(last - wall_started, 1)
            figures["apiserver_cpu_install_s"] = round(process_cpu_seconds(apiserver) - cpu_before, 1)
            if crossplane_pid and xp_before is not None:
                figures["crossplane_cpu_install_s"] = round(process_cpu_seconds(crossplane_pid) - xp_before, 1)
            wait_until_idle(state)
            sampler.finish()
            discovery.finish()
            rss_after = rss_mib(apiserver)
            figures["rss_idle_end_mib"] = round(rss_after)
            figures["mib_per_crd_added"] = round((rss_after - rss_before) / len(expected), 2)
            if installer == "mrap-tenth":
                figures["mib_per_activated_crd_vs_inactive"] = round(
                    (rss_after - figures["rss_inactive_mrds_mib"]) / len(expected), 2)
            _summarise(sampler, state, figures)
            figures.pop("supervisor_events", None)
            peak = max(discovery.seconds) if discovery.seconds else None
            figures["discovery_peak_s"] = round(peak, 2) if peak is not None else None
            p95 = _percentile(discovery.seconds, 0.95)
            figures["discovery_p95_s"] = round(p95, 2) if p95 is not None else None
            figures["discovery_end_kib"] = round(discovery.last_bytes / 1024)
            figures["discovery_aggregated"] = discovery.aggregated
            lags = _v3_lags(state, sampler.v3_changes)
            figures["openapi_v3_lag_p50_s"] = _rounded(_percentile(lags, 0.5))
        except (httpx.HTTPError, OSError, subprocess.SubprocessError, BenchError) as exc:
            kept = keep_logs(state, f"{installer}-{minor}")
            raise BenchError(f"{installer} on Kubernetes {minor}: {' '.join(str(exc).split())[:300]} "
                             f"(the lab's logs are kept in {kept})") from exc
        finally:
            sampler.finish()
            discovery.finish()
            lab.down()
    return figures


def keep_logs(state: LabState, what: str) -> Path:
    """Copy a failed run's lab logs (the supervisor's restarts, each component's output) out of
    its temporary home, into ``bench/results/failed-<what>-<time>/``."""
    import shutil

    target = BENCH_DIR / "results" / f"failed-{what}-{time.strftime('%Y%m%d-%H%M%S')}"
    shutil.copytree(Path(state.run_dir) / "logs", target, dirs_exist_ok=True)
    return target


def _rounded(value: float | None) -> float | None:
    return round(value, 1) if value is not None else None


def _wait_count(state: LabState, path: str, expected: int, what: str, timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    while (found := polled(lambda: count_of(state, path))) < expected:
        if time.monotonic() > deadline:
            raise BenchError(f"only {found} of {expected} {what} after {timeout:.0f} s")
        time.sleep(WAIT_POLL_SECONDS)


def _install(installer: str, state: LabState, directory: Path, packages: list[Any], expected: set[str]) -> None:
    if installer == "kubectl":
        apply_and_wait(state, directory)
    elif installer == "load":
        done = subprocess.run([*crdscope_command(), "load", str(directory), "--json", "--new-run", "--kubeconfig",
                               state.kubeconfig, "--context", state.admin_context],
                              capture_output=True, text=True, timeout=INSTALL_TIMEOUT_SECONDS)
        if done.returncode != 0:
            raise BenchError(f"crdscope load exited {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    elif installer in ("monolith", "family"):
        _apply(state, providers_of(packages))
    elif installer == "mrap-tenth":
        _apply(state, [{"apiVersion": "apiextensions.crossplane.io/v1alpha1",
                        "kind": "ManagedResourceActivationPolicy", "metadata": {"name": "a-tenth"},
                        "spec": {"activate": sorted(expected)}}])
    else:
        raise BenchError(f"unknown installer {installer!r} (one of {', '.join(INSTALLERS)})")


# --------------------------------------------------------------------------- the table


TABLE_ROWS = (
    ("CRDs installed", "crds_installed"),
    ("packages (build + push, s)", ("packages", "package_build_push_s")),
    ("seconds to all Established", "seconds_to_established"),
    ("API server CPU during the install (s)", "apiserver_cpu_install_s"),
    ("Crossplane CPU during the install (s)", "crossplane_cpu_install_s"),
    ("RSS before / idle after (MiB)", ("rss_before_mib", "rss_idle_end_mib")),
    ("RSS added per CRD, idle after vs before (MiB)", "mib_per_crd_added"),
    ("RSS per CRD fitted over the install (MiB)", "rss_mib_per_crd"),
    ("RSS with every MRD inactive (MiB)", "rss_inactive_mrds_mib"),
    ("aggregated discovery GET: peak / p95 (s)", ("discovery_peak_s", "discovery_p95_s")),
    ("aggregated discovery document at the end (KiB)", "discovery_end_kib"),
    ("OpenAPI v3 publication lag p50 / p95 / max (s)",
     ("openapi_v3_lag_p50_s", "openapi_v3_lag_p95_s", "openapi_v3_lag_max_s")),
    ("canary GET p99 (ms) / failures", ("canary_p99_ms", "canary_failures")),
)


def table(documents: list[dict[str, Any]]) -> str:
    """The markdown table of RESULTS.md: one column per run."""
    def cell(figures: dict[str, Any], key: str | tuple[str, ...]) -> str:
        keys = key if isinstance(key, tuple) else (key,)
        return " / ".join("-" if figures.get(k) is None else str(figures.get(k)) for k in keys)

    heads = [f"{d['figures']['installer']} ({d['kubernetes']})" for d in documents]
    lines = ["| figure | " + " | ".join(heads) + " |", "|---" * (len(heads) + 1) + "|"]
    for label, key in TABLE_ROWS:
        lines.append(f"| {label} | " + " | ".join(cell(d["figures"], key) for d in documents) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m bench crossplane [--kubernetes LIST] [--installers LIST] [--size N]``."""
    parser = argparse.ArgumentParser(prog="python -m bench crossplane", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubernetes", default="1.37", help="comma-separated minors (default 1.37)")
    parser.add_argument("--installers", default=",".join(INSTALLERS), help=f"of {', '.join(INSTALLERS)}")
    parser.add_argument("--size", type=int, default=None, help="only the first N CRDs of the set")
    parser.add_argument("--tenth-every", type=int, default=TENTH_EVERY, help="mrap-tenth activates every K-th CRD")
    parser.add_argument("--output", type=Path, default=None, help="directory of the JSON results")
    parser.add_argument("--table", nargs="+", type=Path, metavar="JSON", help="print the RESULTS.md table of results")
    args = parser.parse_args(argv)
    if args.table:
        print(table([json.loads(path.read_text()) for path in args.table]))
        return 0
    installers = [i.strip() for i in args.installers.split(",") if i.strip()]
    unknown = [i for i in installers if i not in INSTALLERS]
    if unknown:
        print(f"bench: crossplane: unknown installer {unknown[0]!r} (one of {', '.join(INSTALLERS)})")
        return 2
    options = Options(append_results_md=False)
    isolate_environment()
    if args.output:
        options.output = args.output
    directory = first_crds(args.size) if args.size else unpack_whole_set()
    names = crd_names(directory)
    for minor in [m.strip() for m in args.kubernetes.split(",") if m.strip()]:
        for installer in installers:
            if not wait_for_memory(memory_for(len(names), len(names))):
                raise BenchError("not enough memory available for a lab of this size")
            say(f"crossplane bench: Kubernetes {minor}, {installer}, {len(names)} CRDs of {SET}")
            figures = measure_run(minor, installer, directory, names, args.tenth_every)
            figures["crds_installed"] = figures.get("activated", len(names))
            result = Result(name=f"crossplane-{installer}", kubernetes=figures["kubernetes"],
                            sizes=f"{SET}:{args.size or 'all'}", figures=figures)
            say(json.dumps(figures, default=str))
            print(json.dumps({"benchmark": result.name, "result": str(result.write(options))}), flush=True)
    return 0
