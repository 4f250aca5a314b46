"""Record a real lab session (a load and a kube-apiserver restart), replay it, report it; --fail-if exits.

The session test builds the monitor in-process (as ``watch --headless`` does) so that
the samples the probes delivered can be compared, object for object, with the
ones replayed from the file; replay and report then run as a person runs them, as
``crdscope`` subprocesses.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers import async_wait_for, secrets_of, steady_cadences, wait_for

pytestmark = pytest.mark.lab

CRDSCOPE = [sys.executable, "-m", "crdscope.cli.main"]
ROOT = Path(__file__).resolve().parents[2]
LOADED = 40
#: Fast cadences: the restart and the load show up within seconds.
CADENCES = {"version": 5.0, "inventory": 1.0, "discovery": 3.0, "throttling": 2.0, "openapi": 2.0, "health": 1.0,
            "latency": 2.0}


def crdscope(*args: str, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    """Run the crdscope command line as a subprocess (the test's XDG/KUBECONFIG environment)."""
    return subprocess.run([*CRDSCOPE, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, **kwargs)


async def test_record_a_load_and_a_restart_then_replay_and_report(fresh_lab, tmp_path):
    from crdscope.loader.engine import LoadEngine
    from crdscope.probes.monitor import Monitor
    from crdscope.base.settings import Settings
    from crdscope.session.events import EventDetector
    from crdscope.session.recorder import Recorder, describe_cluster
    from crdscope.session.replay import ReplayFeed, read_recording

    path = tmp_path / "session.jsonl"
    cluster = fresh_lab.cluster()
    settings = Settings().override("cadences", **steady_cadences(**CADENCES))
    monitor = Monitor(cluster, settings, latest={})
    recorder = Recorder(path, await describe_cluster(cluster))
    detector = EventDetector(settings.thresholds)
    live, live_events = [], []

    def sink(sample):
        live.append(sample)
        recorder(sample)
        for event in detector.observe(sample):
            live_events.append(event)
            recorder(event)

    def seen(probe, predicate):
        return lambda: any(s.probe == probe and predicate(s) for s in live)

    monitor.add_sink(sink)
    running = asyncio.create_task(monitor.run())
    try:
        await async_wait_for(seen("inventory", lambda s: not s.error and s.crds == 0), timeout=60,
                             message="an inventory sample of the empty lab")
        await async_wait_for(seen("health", lambda s: not s.error and s.start_time), timeout=60,
                             message="a health sample")
        engine = LoadEngine(cluster, f"synthetic:{LOADED}", rate=40, crd_watch=monitor.crds, on_progress=sink,
                            runs_directory=tmp_path / "runs")
        final = await engine.run()
        assert (final.state, final.established, final.failed) == ("done", LOADED, 0), final
        listed = await asyncio.to_thread(fresh_lab.kubectl, "get", "crd", "-o", "name")
        assert len(listed.stdout.split()) == LOADED  # the reference client agrees about the lab
        await async_wait_for(seen("inventory", lambda s: not s.error and s.crds == LOADED), timeout=60,
                             message=f"inventory reporting {LOADED} CRDs")

        await asyncio.to_thread(fresh_lab.lab.kill, "apiserver")
        await async_wait_for(seen("health", lambda s: s.error is not None), timeout=60,
                             message="the health probe noticing the API server is gone")
        await asyncio.to_thread(fresh_lab.lab.start, "apiserver")
        await async_wait_for(seen("health", lambda s: not s.error and s.restarts == 1), timeout=120,
                             message="the health probe counting the restart")
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        recorder.close()
        await cluster.aclose()

    # The file replays to exactly what the probes delivered (stable order by sample time).
    recording = read_recording(path)
    assert recording.damage is None and recording.ended
    expected = sorted(live, key=lambda s: s.timestamp)
    assert len(recording.samples) == len(expected) > 20
    for replayed, original in zip(recording.samples, expected, strict=True):
        assert type(replayed) is type(original)
        assert replayed == original, f"{original.probe} sample differs after replay"
    assert recording.events == live_events
    assert {s.probe for s in recording.samples} >= {"inventory", "discovery", "health", "loader", "openapi"}
    assert recording.cluster.server == fresh_lab.server and recording.cluster.kubernetes_version == "v1.37.2"

    feed = ReplayFeed(recording, speed=0)
    replayed = []
    feed.add_sink(replayed.append)
    await asyncio.wait_for(feed.run(), 30)
    assert replayed == expected

    # Replay headlessly, as a person would: the restart is one line among the events.
    done = await asyncio.to_thread(crdscope, "replay", "--headless", str(path))
    assert done.returncode == 0, done.stderr
    assert "API server restarted" in done.stdout
    assert done.stdout.count("API server restarted") == 1
    assert f"replayed {len(expected)} samples" in done.stdout

    # The report lists the restart and the loaded CRD count.
    done = await asyncio.to_thread(crdscope, "report", str(path))
    assert done.returncode == 0, done.stderr
    report = done.stdout
    assert "- **Restarts**: 1 (at " in report
    assert f"- **Loaded**: {LOADED}\n" in report
    assert "- **At start**: 0\n" in report and f"- **At end**: {LOADED}\n" in report
    assert "- **Outage windows**: 1\n" in report
    assert fresh_lab.server in report and "v1.37.2" in report
    html_path = tmp_path / "report.html"
    done = await asyncio.to_thread(crdscope, "report", str(path), "--format", "html", "--output", str(html_path))
    assert done.returncode == 0, done.stderr
    html = html_path.read_text()
    assert html.count("<svg") >= 5 and "<polyline" in html and 'class="marker"' in html  # the restart line
    assert "<script" not in html and "<link" not in html and not re.search(r"""src\s*=""", html)

    # No credential reached the recording.
    content = path.read_bytes()
    for secret in secrets_of(fresh_lab.kubeconfig, fresh_lab.state.pki_dir):
        assert secret not in content


def test_fail_if_exits_0_when_no_threshold_is_crossed(lab, tmp_path):
    record = tmp_path / "quiet.jsonl"
    done = crdscope("watch", "--headless", "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context,
                    "--duration", "12s", "--record", str(record),
                    "--fail-if", "health.restarts>0", "--fail-if", "health.ready==0",
                    "--fail-if", "discovery.seconds>30", "--fail-if", "openapi.backlog>100")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no threshold crossed" in done.stdout
    from crdscope.session.replay import read_recording

    recording = read_recording(record)
    probes = {s.probe for s in recording.samples}
    assert {"health", "discovery", "openapi"} <= probes  # the thresholds were really evaluated
    assert all(not s.error for s in recording.samples if s.probe == "health")


def test_fail_if_exits_1_as_soon_as_a_threshold_is_crossed(lab, tmp_path):
    # The lab is ready (kubectl agrees), so 'health.ready==1' is crossed at the first health sample.
    assert lab.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"
    record = tmp_path / "crossed.jsonl"
    done = crdscope("watch", "--headless", "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context,
                    "--duration", "5m", "--record", str(record),
                    "--fail-if", "health.restarts>0", "--fail-if", "health.ready==1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "threshold crossed: health.ready==1 (health.ready = 1)" in done.stdout
    assert "a --fail-if threshold was crossed" in done.stderr
    from crdscope.session.replay import read_recording

    recording = read_recording(record)  # closed cleanly on the way out, with the crossing as an event
    assert recording.ended and [e.kind for e in recording.events][-1] == "threshold-crossed"


def test_ctrl_c_ends_the_watch_cleanly(lab, tmp_path):
    record = tmp_path / "interrupted.jsonl"
    process = subprocess.Popen([*CRDSCOPE, "watch", "--headless", "--kubeconfig", lab.kubeconfig,
                                "--context", lab.admin_context, "--record", str(record)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        def health_recorded() -> bool:
            return record.exists() and b'"probe":"health"' in record.read_bytes()

        wait_for(health_recorded, timeout=60, message="a recorded health sample")
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130
    assert "watch interrupted after" in stdout
    assert "Traceback" not in stderr and stderr.strip().splitlines()[-1] == "crdscope: interrupted"
    from crdscope.session.replay import read_recording

    recording = read_recording(record)
    assert recording.ended and recording.damage is None and recording.samples


def with_refused_context(lab, path: Path, name: str = "refused") -> Path:
    """The lab's kubeconfig plus a context ``name`` whose server is a loopback port nobody listens on."""
    from crdscope.lab.controlplane import free_port

    kubeconfig = yaml.safe_load(Path(lab.kubeconfig).read_text())
    admin = next(c["context"] for c in kubeconfig["contexts"] if c["name"] == lab.admin_context)
    cluster = dict(next(c["cluster"] for c in kubeconfig["clusters"] if c["name"] == admin["cluster"]))
    cluster["server"] = f"https://127.0.0.1:{free_port()}"
    kubeconfig["clusters"].append({"name": name, "cluster": cluster})
    kubeconfig["contexts"].append({"name": name, "context": {**admin, "cluster": name}})
    path.write_text(yaml.safe_dump(kubeconfig))
    os.chmod(path, 0o600)
    return path


def test_a_headless_watch_whose_cluster_never_answered_exits_3_in_one_line(tmp_path, lab):
    """As doctor does: a pipeline pointed at a wrong address fails, after 10 s of retries, saying why."""
    path = with_refused_context(lab, tmp_path / "kubeconfig")
    started = time.monotonic()
    done = crdscope("watch", "--headless", "--kubeconfig", str(path), "--context", "refused", "--duration", "4s")
    took = time.monotonic() - started
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout == "", done.stdout  # nothing was watched: no line of a watch
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert re.fullmatch(r"crdscope: the API server at https://127\.0\.0\.1:\d+ did not answer in 10\.0 s "
                        r"\(connection refused\): it is down, stopped or not at that address; nothing was watched "
                        r"\(--wait-for-cluster DURATION waits longer\)", lines[0]), lines[0]
    assert 10 <= took < 30, f"exited after {took:.1f} s: the retries at start last 10 s"


def test_a_fleet_watch_with_one_context_answering_runs(tmp_path, lab):
    """A fleet exits 3 only when no context ever answered: the refused one is watched (a probe-down line)."""
    path = with_refused_context(lab, tmp_path / "kubeconfig")
    done = crdscope("watch", "--headless", "--kubeconfig", str(path), "--context", lab.admin_context,
                    "--context", "refused", "--wait-for-cluster", "3s", "--duration", "6s")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith(f"{lab.admin_context}: watching {lab.server}") for line in lines), done.stdout
    assert any(line.startswith("refused: not answering after 3.0 s (connection refused): watched anyway")
               for line in lines), done.stdout
    assert any(line.startswith("refused: ") and "probe down: cannot reach" in line for line in lines), done.stdout
    assert any(line.startswith(f"{lab.admin_context}: watch completed after") for line in lines), done.stdout
    assert "Traceback" not in done.stderr


def read_text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_a_lost_cluster_is_a_finding_and_a_late_one_is_waited_for(fresh_lab, tmp_path):
    """One outage of the lab's API server, seen by two watches (one lab for both: a lab costs a start):

    - the first answered before the server was killed: it says the probes are down and goes on, and
      sees the server back;
    - the second starts while the server is down, with ``--wait-for-cluster``: it says it waits, and
      watches once the server is started again (it would have exited 3 after 10 s without the flag).
    """
    from crdscope.session.replay import read_recording

    first_out, first_record = tmp_path / "first.out", tmp_path / "first.jsonl"
    second_out = tmp_path / "second.out"
    argv = [*CRDSCOPE, "watch", "--headless", "--kubeconfig", fresh_lab.kubeconfig, "--context",
            fresh_lab.admin_context]
    with first_out.open("w") as out:
        first = subprocess.Popen([*argv, "--duration", "5m", "--record", str(first_record)], stdout=out,
                                 stderr=subprocess.PIPE, text=True, cwd=ROOT)
    second = None
    try:
        wait_for(lambda: "watching " in read_text(first_out), timeout=60, message="the first watch watching")
        fresh_lab.lab.kill("apiserver")
        wait_for(lambda: "probe down: cannot reach" in read_text(first_out), timeout=60,
                 message="the first watch saying its probes are down")
        with second_out.open("w") as out:
            second = subprocess.Popen([*argv, "--wait-for-cluster", "3m", "--duration", "5s"], stdout=out,
                                      stderr=subprocess.PIPE, text=True, cwd=ROOT)
        wait_for(lambda: "waiting up to 3m00s for the API server" in read_text(second_out), timeout=60,
                 message="the second watch waiting for the API server")
        assert second.poll() is None and first.poll() is None, read_text(first_out) + read_text(second_out)
        restarted = time.time()
        fresh_lab.lab.start("apiserver")
        _, second_err = second.communicate(timeout=120)
        assert second.returncode == 0, read_text(second_out) + second_err
        assert "watch completed after" in read_text(second_out) and "Traceback" not in second_err

        def healthy_again() -> bool:
            recording = read_recording(first_record) if first_record.exists() else None
            return recording is not None and any(s.probe == "health" and not s.error and s.timestamp > restarted
                                                 for s in recording.samples)

        wait_for(healthy_again, timeout=120, message="the first watch seeing the server back")
        assert first.poll() is None, read_text(first_out)  # the outage did not end it
        first.send_signal(signal.SIGINT)
        _, first_err = first.communicate(timeout=60)
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    assert first.returncode == 130, read_text(first_out) + first_err  # ended by us, not by the outage
    assert "watch interrupted after" in read_text(first_out) and "Traceback" not in first_err
