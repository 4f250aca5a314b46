"""A default watch costs the server next to nothing during a load (issue 24).

The monitor's own requests are counted by path and by part of the monitor at the shared
client's transport (``connection.traffic``) and recorded as ``footprint`` samples: these tests
read them from the recording of a real ``crdscope watch --headless`` while a real
``crdscope load`` installs real AWS CRDs into a lab of the module's own.  Counts, not time:
each part's requests during the load are held to the budget the code declares
(``probes.settings.RequestBudgets``), and ``/openapi/v2`` (the server builds the whole
document for each fetch) is never asked for unless the user asks.  The other two tests
prove the accounting sees v2 when it is asked for, and that the guard holds it back near a
memory limit.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from crdscope.probes.footprint import WALK_MARKER
from crdscope.probes.monitor import request_budgets
from crdscope.base.settings import RequestBudgets, Settings
from crdscope.probes.openapi import CONTENT_FETCHES_PER_ROUND
from tests.conftest import LabHandle
from tests.crdsets import extract
from tests.faults.helpers import crdscope, spawn
from tests.helpers import wait_for

pytestmark = pytest.mark.lab

#: A few hundred real CRDs: the first 300 files of the AWS set (whole groups, as an install adds them).
AWS_CRDS = 300
V2 = "GET /openapi/v2"
V3_DOCUMENTS = "GET /openapi/v3/{group-version}"
#: Beyond its budget, a part may have one run in flight at each end of the window (the latency
#: probe's run is four canaries, the largest of any part).
SLACK_REQUESTS = 4


@pytest.fixture(scope="module")
def own_lab(module_lab):
    """A lab of this module's own: the AWS CRDs loaded here would fatten the shared lab's /metrics."""
    return module_lab


def footprints(recording: Path) -> list[dict]:
    """The footprint samples of a recording so far (a torn last line is skipped)."""
    found = []
    if not recording.exists():
        return found
    for line in recording.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("type") == "sample" and record.get("probe") == "footprint":
            found.append(record["data"])
    return found


def latest_of(recording: Path, probe: str) -> dict | None:
    data = None
    for line in recording.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("type") == "sample" and record.get("probe") == probe:
            data = record["data"]
    return data


def start_watch(lab: LabHandle, recording: Path, *extra: str) -> subprocess.Popen:
    watch = spawn("watch", "--headless", "--record", str(recording), "--kubeconfig", lab.kubeconfig,
                  "--context", lab.admin_context, *extra)
    wait_for(lambda: footprints(recording) or watch.poll() is not None, timeout=90,
             message="the watch's first footprint sample")
    assert watch.poll() is None, watch.stderr.read()
    return watch


def stop_watch(watch: subprocess.Popen) -> str:
    watch.send_signal(signal.SIGINT)
    out, err = watch.communicate(timeout=60)
    assert "Traceback" not in err, err
    return out


def load(lab: LabHandle, source: str) -> None:
    done = crdscope("load", source, "--kubeconfig", lab.kubeconfig, "--context", lab.admin_context, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr


def by_origin(sample: dict, part: str) -> int:
    return sample["by_origin"].get(part, {}).get("requests", 0)


def by_path(sample: dict, path: str) -> int:
    return sample["by_path"].get(path, {}).get("requests", 0)


def test_a_default_watch_of_a_load_never_asks_for_openapi_v2_and_keeps_its_budgets(own_lab, shared_crds, tmp_path):
    paths = extract("provider-aws", tmp_path / "aws", limit=AWS_CRDS)
    recording = tmp_path / "watch.jsonl"
    watch = start_watch(own_lab, recording)
    try:
        # Start-up reads everything once (the CRD list, the first legacy walk): not the load's cost.
        wait_for(lambda: footprints(recording)[-1]["legacy_walks"] >= 1, timeout=60, message="the first walk")
        before = footprints(recording)[-1]
        load(own_lab, str(tmp_path / "aws"))
        loaded_at = time.time()
        wait_for(lambda: footprints(recording)[-1]["timestamp"] >= loaded_at, timeout=30,
                 message="a footprint sample after the load")
        after = next(s for s in footprints(recording) if s["timestamp"] >= loaded_at)
    finally:
        out = stop_watch(watch)
    last = footprints(recording)[-1]
    assert len(paths) == AWS_CRDS
    assert by_path(last, V2) == 0, f"a default watch asked for /openapi/v2: {last['by_path']}"
    openapi = latest_of(recording, "openapi")
    assert openapi is not None and openapi["v2_fetched_at"] is None and openapi["v2_note"].startswith("off")

    minutes = max(1.0, (after["timestamp"] - before["timestamp"]) / 60.0)
    budgets = RequestBudgets()
    budget_of = request_budgets(Settings())
    over = {}
    for part in set(after["by_origin"]) | set(before["by_origin"]):
        sent = by_origin(after, part) - by_origin(before, part)
        budget = budget_of.get(part)
        if budget is not None and sent > budget * minutes + SLACK_REQUESTS:
            over[part] = (sent, round(budget * minutes, 1))
    assert not over, f"parts over their request budget during a {minutes:.1f}-minute load (sent, allowed): {over}"
    # The legacy walk (2+N requests) waits for the install to settle; v3 documents keep their own budget.
    walks = by_path(after, WALK_MARKER) - by_path(before, WALK_MARKER)
    assert walks == 0, f"{walks} legacy walks during the load"
    documents = by_path(after, V3_DOCUMENTS) - by_path(before, V3_DOCUMENTS)
    assert documents <= budgets.openapi_v3_documents * minutes + CONTENT_FETCHES_PER_ROUND, documents
    # The loader ran in its own process: none of its requests are the monitor's.
    assert after["loader_requests_total"] == 0
    assert "crdscope's own load on the server:" in out, out


def test_asked_for_openapi_v2_is_fetched_and_counted(own_lab, tmp_path):
    """The accounting the test above relies on sees /openapi/v2 when a user asks for it."""
    recording = tmp_path / "watch-v2.jsonl"
    watch = start_watch(own_lab, recording, "--openapi-v2")
    try:
        load(own_lab, "synthetic:5")  # v2 is fetched after a CRD change
        wait_for(lambda: by_path(footprints(recording)[-1], V2) >= 1, timeout=120,
                 message="the footprint counting a /openapi/v2 fetch")
        wait_for(lambda: (latest_of(recording, "openapi") or {}).get("v2_bytes"), timeout=300,
                 message="the openapi sample with the v2 document's size")
        # The footprint reads the counts every 5 s: one taken before the answer's first bytes can be
        # the last when the fetch and the openapi sample fall between two of its runs.
        wait_for(lambda: footprints(recording)[-1]["by_path"].get(V2, {}).get("bytes", 0) > 0, timeout=30,
                 message="a footprint counting the v2 answer's bytes")
    finally:
        stop_watch(watch)
    last = footprints(recording)[-1]
    assert last["openapi_v2"] is True and last["by_path"][V2]["bytes"] > 0


def test_near_its_memory_limit_the_guard_holds_openapi_v2_back(own_lab, tmp_path):
    probe = crdscope("probe", "health", "--json", "--kubeconfig", own_lab.kubeconfig, "--context",
                     own_lab.admin_context, timeout=120)
    rss = json.loads(probe.stdout)["rss_bytes"]
    limit_mib = int(rss / 0.9) >> 20  # resident memory at about 90% of the limit: over the 80% guard
    recording = tmp_path / "watch-guarded.jsonl"
    watch = start_watch(own_lab, recording, "--openapi-v2", "--memory-limit", f"{limit_mib}Mi")
    try:
        wait_for(lambda: latest_of(recording, "health"), timeout=60, message="a health sample")
        load(own_lab, "synthetic:5")

        def held() -> dict:
            return footprints(recording)[-1]["held_back"]
        wait_for(lambda: "openapi_v2" in held(), timeout=120, message="the guard holding /openapi/v2 back")
    finally:
        stop_watch(watch)
    last = footprints(recording)[-1]
    assert by_path(last, V2) == 0, last["by_path"]
    assert f"of its {limit_mib:,} MiB limit" in last["held_back"]["openapi_v2"], last["held_back"]
    assert (latest_of(recording, "openapi") or {}).get("v2_note", "").startswith("held back"), \
        latest_of(recording, "openapi")
