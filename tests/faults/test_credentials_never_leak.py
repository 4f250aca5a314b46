"""Credentials never leave the kubeconfig: every artefact of a session is searched for key material.

A session against a lab of the test's own, as a person would run one, with
every artefact written under one folder (XDG directories pointed there):

* the TUI (Pilot): probes, a load started from the loader action, an SVG
  screenshot (``s`` and ``save_screenshot``), its recording;
* ``crdscope watch --headless`` with a recording and the exporter (scraped);
* ``crdscope report`` of both recordings, Markdown and HTML;
* the log file, the load run's journal, ``crdscope probe ... --json``, and the
  error output of failing commands (a wrong CA, a refused load);

then every file is searched for the lab's client keys and certificates in
every form a leak could take (kubeconfig base64, PEM body lines).
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import httpx
import pytest
import yaml

from crdscope.lab.controlplane import free_port
from crdscope.lab.pki import CertificateAuthority
from crdscope.base.settings import LoaderSettings, Settings
from tests.e2e.test_rules_prometheus import probes_up
from tests.faults.helpers import crdscope, spawn
from tests.helpers import async_wait_for, secrets_of, start_loader_as_configured, wait_for
from crdscope.tui.launch import build_app

pytestmark = pytest.mark.lab


async def test_no_artefact_of_a_session_holds_key_material(fresh_lab, tmp_path, monkeypatch):
    out = tmp_path / "artefacts"
    inputs = tmp_path / "inputs"  # broken kubeconfigs hold keys on purpose: not artefacts
    inputs.mkdir()
    for variable in ("XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(variable, str(out / variable.lower()))
    kubeconfig = fresh_lab.kubeconfig
    cli = ("--kubeconfig", kubeconfig)

    # The TUI, with a load, screenshots and a recording.
    # (build_app names the cluster in the recording with its own asyncio.run: a thread of its own)
    app = await asyncio.to_thread(build_app, kubeconfig, fresh_lab.admin_context, record=out / "tui.jsonl",
                                  lab=fresh_lab.lab, settings=Settings(loader=LoaderSettings(source="synthetic:5",
                                                                                              rate=50.0)))
    async with app.run_test(size=(160, 50)) as pilot:
        await async_wait_for(lambda: all(app.store.last_good(p) for p in ("inventory", "health", "discovery")),
                             timeout=120, message="first samples")
        await start_loader_as_configured(app)
        await async_wait_for(lambda: (s := app.store.latest("loader")) is not None and s.state == "done",
                             timeout=120, message="the load to finish")
        await pilot.press("s")
        await async_wait_for(lambda: app.screenshots, timeout=30, message="the screenshot key's SVG")
        app.save_screenshot(path=str(out), filename="pilot.svg")
    assert app.session.close_recorder() is not None

    # Headless, with the exporter scraped while it runs.
    port = free_port()
    watch = spawn("watch", "--headless", *cli, "--record", str(out / "headless.jsonl"), "--duration", "20s",
                  "--serve-metrics", f"127.0.0.1:{port}")

    def scraped() -> str | None:
        try:
            text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        except httpx.HTTPError:
            return None
        return text if "health" in probes_up(text) else None

    (out / "exporter.txt").write_text(wait_for(scraped, timeout=60, interval=0.5, message="an exporter scrape"))
    stdout, stderr = watch.communicate(timeout=120)
    assert watch.returncode == 0, stderr
    (out / "watch.out").write_text(stdout + stderr)

    # Reports of both recordings, and what the command line prints, errors included.
    for name in ("tui", "headless"):
        for form in ("md", "html"):
            done = crdscope("report", str(out / f"{name}.jsonl"), "--format", form,
                            "--output", str(out / f"report-{name}.{form}"))
            assert done.returncode == 0, done.stderr
    document = yaml.safe_load(Path(kubeconfig).read_text())
    document["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(
        CertificateAuthority("someone-else").pair().cert_pem).decode()
    (inputs / "wrong-ca.yaml").write_text(yaml.safe_dump(document))
    runs = {
        "probe-health.json": crdscope("probe", "health", "--json", *cli),
        "probe-discovery.json": crdscope("probe", "discovery", "--json", *cli),
        "wrong-ca.err": crdscope("probe", "version", "--kubeconfig", str(inputs / "wrong-ca.yaml")),
        "refused-load.err": crdscope("load", "synthetic:3", *cli, "--context", fresh_lab.restricted_context),
    }
    assert runs["wrong-ca.err"].returncode == 2 and runs["refused-load.err"].returncode == 3
    for name, done in runs.items():
        (out / name).write_text(done.stdout + done.stderr)

    # Every artefact, searched for every form of the lab's keys and certificates.
    artefacts = [path for path in out.rglob("*") if path.is_file()]
    kinds = {path.suffix for path in artefacts}
    assert {".svg", ".jsonl", ".md", ".html", ".log", ".txt", ".json", ".err"} <= kinds, kinds
    assert any(path.parent.name == "loads" for path in artefacts)  # the load run's journal
    secrets = secrets_of(kubeconfig, fresh_lab.state.pki_dir)
    for path in artefacts:
        content = path.read_bytes()
        assert content or path.suffix == ".log", f"{path} is empty"  # a quiet session logs nothing
        leaked = [secret[:16] for secret in secrets if secret in content]
        assert not leaked, f"{path.relative_to(out)} holds key material starting {leaked}"
    print(f"\nsearched {len(artefacts)} artefacts for {len(secrets)} secrets: "
          + ", ".join(sorted(str(p.relative_to(out)) for p in artefacts)))
