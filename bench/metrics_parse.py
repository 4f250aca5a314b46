"""Benchmark 5: the streaming /metrics parser against prometheus_client's, on a real scrape.

The scrape is taken once from a lab holding the whole AWS set and saved in the
cache (it is tens of megabytes; it is not committed).  Both parsers read the
same bytes in alternating runs; figures: bytes per second and peak traced
memory while parsing.
"""

from __future__ import annotations

import gc
import subprocess
import tracemalloc
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from crdscope.connection.metrics import MetricsParser
from crdscope.base.paths import cache_dir

from .common import Options, Result, alternate, ratios, stats, timed
from .labs import shared_lab

#: The families crdscope's probes keep (throttling, health, latency).
FAMILIES_IN_USE = [
    "apiserver_flowcontrol_rejected_requests_total", "apiserver_flowcontrol_current_inqueue_requests",
    "apiserver_flowcontrol_current_executing_seats", "apiserver_flowcontrol_request_wait_duration_seconds",
    "apiserver_flowcontrol_nominal_limit_seats", "apiserver_flowcontrol_current_limit_seats",
    "apiserver_flowcontrol_dispatched_requests_total", "process_resident_memory_bytes",
    "go_memstats_heap_inuse_bytes", "go_goroutines", "process_start_time_seconds", "process_open_fds",
    "apiserver_storage_objects", "apiserver_request_duration_seconds",
]


def saved_scrape(options: Options) -> tuple[Path, str]:
    """A real /metrics of a lab with the whole AWS set (or a small set when quick)."""
    size = 50 if options.quick else None
    path = cache_dir() / "bench-data" / f"metrics-provider-aws-{size or 'all'}.txt"
    version_file = path.with_suffix(".version")
    if path.exists() and version_file.exists():
        return path, version_file.read_text()
    path.parent.mkdir(parents=True, exist_ok=True)
    state = shared_lab("provider-aws", size)
    # Touch every CRD's endpoint once, as clients would, so per-resource families exist.
    subprocess.run(["kubectl", f"--kubeconfig={state.kubeconfig}", "api-resources"],
                   capture_output=True, timeout=600)
    text = subprocess.run(["kubectl", f"--kubeconfig={state.kubeconfig}", "get", "--raw", "/metrics"],
                          capture_output=True, timeout=600, check=True).stdout
    path.write_bytes(text)
    version_file.write_text(state.kubernetes_version)
    return path, state.kubernetes_version


def _stream(data: bytes, families: list[str] | None) -> None:
    parser = MetricsParser(families)
    for start in range(0, len(data), 1 << 16):
        parser.feed(data[start:start + (1 << 16)])
    parser.close()


def _prometheus_client(data: bytes) -> None:
    for family in text_string_to_metric_families(data.decode()):
        for _ in family.samples:
            pass


def _peak(function) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def run(options: Options) -> Result:
    path, kubernetes = saved_scrape(options)
    data = path.read_bytes()
    contenders = {
        "stream_in_use": lambda: timed(lambda: _stream(data, FAMILIES_IN_USE)),
        "stream_all": lambda: timed(lambda: _stream(data, None)),
        "prometheus_client": lambda: timed(lambda: _prometheus_client(data)),
    }
    times = alternate(contenders, 1 if options.quick else options.runs)
    megabytes = len(data) / 1e6
    figures = {
        "scrape_mb": round(megabytes, 1),
        **{f"{name}_mb_per_s": stats([megabytes / t for t in values]) for name, values in times.items()},
        "speedup_in_use_vs_prometheus_client": stats(ratios(times["prometheus_client"], times["stream_in_use"])),
        "speedup_all_vs_prometheus_client": stats(ratios(times["prometheus_client"], times["stream_all"])),
        "peak_mb_stream_in_use": round(_peak(lambda: _stream(data, FAMILIES_IN_USE)) / 1e6, 2),
        "peak_mb_prometheus_client": round(_peak(lambda: _prometheus_client(data)) / 1e6, 2),
    }
    result = Result("metrics_parse", kubernetes, f"provider-aws {'50' if options.quick else 'all'} CRDs",
                    figures)
    result.goals["stream at least as fast as prometheus_client"] = (
        figures["speedup_all_vs_prometheus_client"].get("median", 0) >= 1.0)
    return result
