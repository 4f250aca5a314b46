"""``crdscope doctor`` on the lab, as a person runs it: exit code by the worst finding."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess

import pytest

from crdscope.findings.kubectl_discovery import SMALL_CLUSTER_GROUP_VERSIONS
from tests.crdsets import crd_names, extract
from tests.faults.helpers import crdscope, spawn

RANK = {"info": 0, "warning": 1, "critical": 2}

pytestmark = pytest.mark.lab


def test_doctor_on_an_idle_small_lab_finds_nothing_and_exits_0(lab):
    done = crdscope("doctor", "--duration", "20s", "--json", "--kubeconfig", lab.kubeconfig,
                    "--context", lab.admin_context, timeout=120)
    report = json.loads(done.stdout)
    serious = [f for f in report["findings"] if f["severity"] != "info"]
    assert done.returncode == 0 and not serious, (done.returncode, serious, done.stderr)
    assert report["exit_code"] == 0 and report["cluster"]["server"] == lab.server
    assert report["samples"] > 20  # the responsiveness probe alone reports every second
    assert "API server answering" in " ".join(report["checked"])
    assert report["not_checked"] == [], report["not_checked"]  # every probe answered within 20 s


def test_doctor_markdown_says_what_it_checked(lab):
    done = crdscope("doctor", "--duration", "5s", "--format", "md", "--kubeconfig", lab.kubeconfig,
                    "--context", lab.admin_context, timeout=120)
    assert done.returncode in (0, 1), done.stderr  # a busy machine may see a slow canary in 5 s
    assert done.stdout.startswith("### crdscope doctor: ")
    assert "Nothing found. Checked:" in done.stdout or "**" in done.stdout


def test_doctor_rejects_a_bad_duration_in_one_line():
    done = crdscope("doctor", "--duration", "soon", timeout=60)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert "not a duration" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(("critical_fraction", "severity", "code"), [(0.999, "warning", 1), (0.002, "critical", 2)])
def test_doctor_exits_1_on_a_warning_and_2_on_a_critical_finding(lab, tmp_path, critical_fraction, severity, code):
    """The README's exit codes by the worst finding, on the idle lab: its memory judged against an 8 GiB limit
    with the headroom thresholds of a config.toml, so that the same RSS is a warning or a critical finding."""
    settings = tmp_path / "config" / "crdscope" / "config.toml"
    settings.parent.mkdir(parents=True)
    settings.write_text("[thresholds]\nmemory_limit_fraction_warn = 0.001\n"
                        f"memory_limit_fraction_critical = {critical_fraction}\n")
    done = crdscope("doctor", "--duration", "10s", "--json", "--memory-limit", "8Gi", "--kubeconfig", lab.kubeconfig,
                    "--context", lab.admin_context, env={"XDG_CONFIG_HOME": str(tmp_path / "config")}, timeout=180)
    found = headroom(done)
    # An idle API server holds between 8 MiB and 8 GiB: a fraction above 0.001, and below 0.999.
    assert found["severity"] == severity, found
    worst = max(RANK[f["severity"]] for f in json.loads(done.stdout)["findings"])
    assert done.returncode == json.loads(done.stdout)["exit_code"] == worst == code, (done.returncode, done.stderr)


#: Whole API groups of the AWS provider: about 190 CRDs, and with the built-in ones more group-versions
#: than a small cluster has (findings.kubectl_discovery.SMALL_CLUSTER_GROUP_VERSIONS).
AWS_GROUPS = 36


def test_doctor_on_an_aws_slice_names_kubectl_and_unused_crds(fresh_lab, shared_crds, tmp_path):
    """The kubectl and unused-CRD findings with their evidence, checked against kubectl itself.

    On a lab of its own: the API server keeps /metrics series for every CRD it ever served, and
    190 AWS CRDs would fatten the shared lab's /metrics for every later test (a Prometheus with a
    1 s scrape timeout then misses scrapes).
    """
    lab = fresh_lab
    paths = extract("provider-aws", tmp_path / "aws", groups=AWS_GROUPS)
    names = crd_names(paths)
    lab.kubectl("apply", "--server-side", "-f", str(tmp_path / "aws"), timeout=900)
    lab.kubectl("wait", "--for=condition=Established", "--timeout=300s", "crd", *names, timeout=400)
    done = crdscope("doctor", "--duration", "20s", "--json", "--kubeconfig", lab.kubeconfig,
                    "--context", lab.admin_context, timeout=240)
    api_versions = lab.kubectl("api-versions").stdout.split()
    assert len(api_versions) >= SMALL_CLUSTER_GROUP_VERSIONS  # the slice is big enough for the finding
    report = json.loads(done.stdout)
    by_kind = {f["id"].split(":")[0]: f for f in report["findings"]}
    worst = max((RANK[f["severity"]] for f in report["findings"]), default=0)
    assert done.returncode == report["exit_code"] == worst, (done.returncode, report["exit_code"], worst)
    # Unused CRDs: none of the slice's kinds has an object, as kubectl counts the whole cluster's CRDs.
    unused = by_kind["unused-crds"]
    evidence = " ".join(unused["evidence"])
    counted = re.search(r"crds_without_objects = ([\d,]+) of health.crds = ([\d,]+)", evidence)
    assert counted, evidence
    without, total = (int(x.replace(",", "")) for x in counted.groups())
    assert total >= len(names) and without >= len(names), (without, total, len(names))
    assert f"{without:,} of {total:,} CRDs have no objects" in unused["title"]
    # kubectl: the local client's version as kubectl itself reports it, and the cluster's group-versions.
    client = json.loads(subprocess.run(["kubectl", "version", "--client", "-o", "json"], capture_output=True,
                                       text=True, check=True).stdout)["clientVersion"]["gitVersion"]
    kubectl_finding = by_kind["kubectl-discovery"]
    assert client in kubectl_finding["title"], (client, kubectl_finding["title"])
    group_versions = re.search(r"discovery.group_versions = (\d+)", " ".join(kubectl_finding["evidence"]))
    # kubectl lists the core "v1" too; crdscope counts the group-versions a discovery walk fetches.
    assert group_versions and abs(int(group_versions.group(1)) - len(api_versions)) <= 1, \
        (group_versions, len(api_versions))
    # The local kubectl was run for real with an empty cache dir; the title states that figure,
    # and the model's figure stays in the evidence beside it.
    measured = next((e for e in kubectl_finding["evidence"] if e.startswith("measured: ")), None)
    assert measured and "api-resources with an empty --cache-dir took" in measured, kubectl_finding["evidence"]
    figure = re.search(r"took ([\d.]+) s", measured).group(1)
    assert f"about {figure} s" in kubectl_finding["title"], (measured, kubectl_finding["title"])
    assert any(e.startswith("modelled: ") for e in kubectl_finding["evidence"])
    assert kubectl_finding["cause"] and kubectl_finding["remedy"] and unused["remedy"]


#: RSS / limit for the headroom tests: inside the warning band (0.8 to 0.95) with room both ways
#: for an idle API server's RSS to drift, and far enough from the cap that nothing is OOM-killed.
HEADROOM_FRACTION = 0.87


def headroom(done) -> dict:
    report = json.loads(done.stdout)
    found = [f for f in report["findings"] if f["id"] == "memory-headroom"]
    assert found, (report["findings"], done.stderr)
    return found[0]


@pytest.fixture(scope="module")
def capped(lab_binaries):
    """A lab whose API server runs under a 2 GiB memory cap, with a tight limit for headroom to judge."""
    from crdscope.lab.controlplane import Lab, LabOptions

    lab = Lab(name="capped")  # under $CRDSCOPE_LAB_HOME, where crdscope processes look for labs
    state = lab.up(lab_binaries, options=LabOptions(name="capped", memory_limit=2 << 30))
    where = ("--kubeconfig", state.kubeconfig, "--context", state.admin_context)
    try:
        yield lab, state, where
    finally:
        lab.down()


def tight_limit_mib(where) -> int:
    """A limit the API server's RSS now sits at HEADROOM_FRACTION of (read on the cluster)."""
    health = json.loads(crdscope("probe", "health", "--json", *where, timeout=120).stdout)
    return int(health["rss_bytes"] / HEADROOM_FRACTION / 2**20)


def test_doctor_judges_memory_headroom_against_a_given_limit_and_a_capped_lab(capped):
    """``--memory-limit`` on any cluster; a capped crdscope lab's cap without the flag."""
    lab, _, where = capped
    limit_mib = tight_limit_mib(where)
    # A limit given on the command line (the lab's own 2 GiB cap is far away and loses to it).
    given = headroom(crdscope("doctor", "--duration", "10s", "--json", "--memory-limit", f"{limit_mib}Mi",
                              *where, timeout=180))
    assert f"of its {limit_mib:,} MiB limit" in given["title"], given
    assert given["severity"] in ("warning", "critical") and "health.rss_bytes" in given["evidence"][0]
    # The lab's cap, changed in place as `crdscope lab limit` does: known without the flag.
    lab.set_memory_limit(limit_mib << 20)
    try:
        done = crdscope("doctor", "--duration", "10s", "--json", *where, timeout=180)
    finally:
        lab.set_memory_limit(2 << 30)
    from_lab = headroom(done)
    assert f"of its {limit_mib:,} MiB limit" in from_lab["title"], from_lab
    assert done.returncode >= RANK[from_lab["severity"]] >= 1  # exit by the worst finding


def test_a_headless_watch_follows_lab_limit_while_it_runs(capped):
    """``crdscope lab limit`` resizes the cap under a running watch: its headroom finding uses the new one."""
    lab, _, where = capped
    limit_mib = tight_limit_mib(where)
    watch = spawn("watch", "--headless", "--duration", "90s", *where)
    try:
        lines: list[str] = []
        first = watch.stdout.readline()
        assert first.startswith("watching "), first + watch.stderr.read()
        lab.set_memory_limit(limit_mib << 20)
        for line in watch.stdout:  # the watch prints a line as each finding opens
            lines.append(line)
            if f"of its {limit_mib:,} MiB limit" in line:
                break
        else:
            raise AssertionError("no headroom finding with the new limit in 90 s:\n" + "".join(lines))
    finally:
        watch.terminate()
        watch.communicate(timeout=60)
        lab.set_memory_limit(2 << 30)


async def test_the_monitor_follows_lab_limit_while_it_runs(capped):
    """The TUI reads the lab's cap off its event loop; a resize reaches its findings and health panel."""
    from crdscope.base.samples.health import HealthSample
    from crdscope.tui.launch import build_app
    from crdscope.tui.panels.health import HealthPanel
    from tests.helpers import async_wait_for

    lab, state, where = capped
    limit_mib = await asyncio.to_thread(tight_limit_mib, where)
    app = build_app(state.kubeconfig, state.admin_context, record=None, lab=lab)
    async with app.run_test(size=(100, 30)):
        await async_wait_for(lambda: app.store.last_good_of(HealthSample), timeout=90, message="a health sample")
        assert app.session.memory_limit == 2 << 30
        await asyncio.to_thread(lab.set_memory_limit, limit_mib << 20)
        try:
            def opened():
                return [f for f in app.core.findings.current()
                        if f.id == "memory-headroom" and f"of its {limit_mib:,} MiB limit" in f.title]
            await async_wait_for(opened, timeout=60, message="the headroom finding against the new limit")
            assert app.monitor_screen.query_one(HealthPanel).memory_limit() == limit_mib << 20
        finally:
            await asyncio.to_thread(lab.set_memory_limit, 2 << 30)
