"""A probe added as docs/architecture.md says (its module, its test, one row of the registry) is seen
in the TUI's header, the exporter and a recording, with no other file touched.

The toy probe is ``tests/toy/livez.py``; this test is its test; the row is added here.  The monitor
runs it against the real lab beside every other probe.
"""

from __future__ import annotations

import pytest

from crdscope.probes.registry import ProbeEntry

pytestmark = pytest.mark.lab

def livez() -> ProbeEntry:
    """What the registry imports when the toy probe is first asked for (a built-in probe's row has
    one such function in probes/registry.py)."""
    from tests.toy import livez

    return ProbeEntry(livez.LivezProbe, livez.LivezSample, livez.make_probe, livez.once)


@pytest.fixture
def livez_registered(monkeypatch):
    """The one registration: a row of ``probes.registry.PROBES`` (its name, its samples' module, its loader)."""
    from crdscope.probes import registry

    monkeypatch.setattr(registry, "PROBES", (*registry.PROBES, registry.ProbeKind("livez", "tests.toy.livez", livez)))


async def test_a_toy_probe_reaches_the_tui_the_exporter_and_a_recording(lab, tmp_path, livez_registered):
    import asyncio

    from prometheus_client import CollectorRegistry, generate_latest

    from crdscope.session.exporter import SampleCollector
    from crdscope.session.replay import read_recording
    from crdscope.tui.header import ClusterHeader
    from crdscope.tui.launch import build_app
    from tests.helpers import async_wait_for
    from tests.toy.livez import LivezSample
    from tests.tui.conftest import widget_text

    recording = tmp_path / "toy.jsonl"
    # Opening a recording asks the server who it is (its own event loop): off this test's loop.
    app = await asyncio.to_thread(build_app, lab.kubeconfig, lab.admin_context, record=recording)
    async with app.run_test(size=(160, 40)) as pilot:
        answered = await async_wait_for(
            lambda: (s := app.store.last_good_of(LivezSample)) is not None and s.answers >= 2 and s,
            timeout=60, message="two answers of the toy probe")
        assert answered.live

        # The TUI: the header's probe chips list it (from the store's probe health).
        header = app.monitor_screen.query_one(ClusterHeader)
        await async_wait_for(lambda: "livez" in header.markup(), timeout=10, message="the toy probe's chip")
        await pilot.pause()
        assert "livez" in widget_text(header)

        # The exporter: its figures, from the same store, with nothing declared for it.
        collector = SampleCollector()
        collector.watch(app.core)
        prometheus = CollectorRegistry(auto_describe=False)
        prometheus.register(collector)
        text = generate_latest(prometheus).decode()
        assert 'crdscope_livez_live{cluster="crdscope-lab"} 1.0' in text, text
        assert 'crdscope_probe_up{cluster="crdscope-lab",probe="livez"} 1.0' in text

        written = app.session.close_recorder()
    assert written == str(recording)

    # The recording: it replays as the toy's own sample type.
    replayed = [s for s in read_recording(recording).samples if s.probe == "livez"]
    assert replayed and all(isinstance(s, LivezSample) for s in replayed)
    assert max(s.answers for s in replayed) >= 2
