"""The crash-loop finding (issue 27) on constructed samples: opens once, holds, closes after quiet."""

from __future__ import annotations

import dataclasses
import math
import re

from crdscope.costmodel.attribution import startup_need, typical_terms
from crdscope.costmodel.coefficients import for_minor
from crdscope.costmodel.features import features_of_spec
from crdscope.costmodel.model import estimate
from crdscope.findings.crashloop import CRASH_LOOP
from crdscope.base.facts import ClusterFacts, LabHooks
from crdscope.base.samples.inventory import InventorySample
from crdscope.findings.engine import FindingsEngine
from crdscope.findings.model import CLOSED, OPENED
from crdscope.base.samples.health import HealthSample, Outage
from crdscope.base.restarts import IDENTITY_LEASE, LAB_SUPERVISOR, START_TIME, RestartEvent
from crdscope.base.settings import Thresholds
from crdscope.base.samples.version import VersionSample

MIB = 1 << 20
LIMIT = 700 * MIB
CYCLE = 20.0  # a death every 20 s: 12 s up, 8 s down


def death(at: float, *, oom: bool | None = True, rss: int | None = None) -> RestartEvent:
    return RestartEvent(at, LAB_SUPERVISOR, "apiserver", oom_killed=oom, uptime_seconds=12.0,
                        rss_bytes_at_death=rss)


def loop_sample(now: float, deaths: list[RestartEvent], *, down: bool, rss: int | None = None,
                error: str | None = None, crds: int | None = None) -> HealthSample:
    outages = tuple(Outage(d.at, d.at + 8.0, 8.0, "refused") for d in deaths if d.at + 8.0 <= now)
    crds = crds if crds is not None else (600 if not error else None)
    return HealthSample(timestamp=now, error=error, down=down, rss_bytes=rss, crds=crds,
                        restarts=len(deaths), restarts_source=LAB_SUPERVISOR,
                        restarts_by_source={LAB_SUPERVISOR: len(deaths), START_TIME: max(0, len(deaths) - 2)},
                        restart_events=tuple(deaths), oom_kills=sum(1 for d in deaths if d.oom_killed),
                        outages=outages)


def typical_limit_mib(crds: int, minor: str = "1.37") -> int:
    """The limit the remedy must name for ``crds`` typical CRDs, worked out from the coefficient file by
    the rule the issue gives: the upper end of the model's interval (RSS: at least ±25%, else twice the
    calibration's relative RMS, on what the CRDs add to the server without them) plus 30%."""
    coefficients = for_minor(minor)
    rss = coefficients.figure("rss_bytes")
    per_crd = sum(rss["terms"].get(name, 0.0) * value for name, value in typical_terms(minor).items())
    added = rss["terms"]["fixed"] + crds * per_crd
    high = coefficients.baseline["rss_bytes"] + added * (1 + max(0.25, 2 * rss["relative_rms"]))
    return math.ceil(high * 1.3 / MIB)


def named_limit(remedy: str) -> int:
    found = re.search(r"raise the memory limit to at least ([\d,]+) MiB", remedy)
    assert found, remedy
    return int(found.group(1).replace(",", ""))


def engine(facts: ClusterFacts | None = None) -> FindingsEngine:
    found = FindingsEngine(Thresholds(), facts=facts or ClusterFacts(flag_limit=LIMIT))
    found.observe(VersionSample(timestamp=0.0, major="1", minor="37"))
    return found


def run_loop(found: FindingsEngine, deaths_at: list[float], until: float) -> list:
    """Samples every 5 s through a loop of deaths: down 8 s after each, up (and growing) otherwise."""
    changes = []
    t = 0.0
    while t <= until:
        deaths = [death(at) for at in deaths_at if at <= t]
        down = any(at <= t < at + 8.0 for at in deaths_at)
        if down:
            changes += found.observe(loop_sample(t, deaths, down=True, error="connection refused"))
        else:  # a fresh process starts small and grows towards the limit
            up_since = max((at + 8.0 for at in deaths_at if at + 8.0 <= t), default=0.0)
            grown = min(int(LIMIT * 0.99), int((300 + 15 * (t - up_since)) * MIB))
            changes += found.observe(loop_sample(t, deaths, down=False, rss=grown))
        t += 5.0
    return changes


def test_a_crash_loop_is_one_critical_finding_that_holds_through_the_restarts_and_closes_after_quiet():
    found = engine()
    deaths_at = [100.0 + CYCLE * i for i in range(8)]
    changes = run_loop(found, deaths_at, until=260.0)
    loop = [c for c in changes if c.finding.id == CRASH_LOOP]
    assert [c.change for c in loop] == [OPENED]  # once, then held through five more restarts
    opened = loop[0]
    assert opened.timestamp == 140.0  # the third death
    assert opened.finding.since == 100.0  # the loop began with the first
    assert "OOM-killed" in opened.finding.title and "(likely)" not in opened.finding.title  # the lab confirms
    evidence = "\n".join(found.open[CRASH_LOOP].evidence)
    assert "700 MiB" in evidence and "lab supervisor" in evidence and "OOM-kill counter" in evidence
    need = startup_need(600, "1.37").total_bytes
    assert f"~{need / MIB:,.0f} MiB" in evidence  # what the cost model says 600 CRDs need
    assert "typical CRDs" in evidence  # no CRD terms counted: priced as a real provider's
    # The limit named: the model's upper end for 600 typical CRDs plus 30%, not its value plus 30%.
    remedy = found.open[CRASH_LOOP].remedy
    assert named_limit(remedy) == typical_limit_mib(600) > math.ceil(need * 1.3 / MIB)
    # --memory-limit was given: the limit is the platform's, and crdscope's flag follows it.
    assert f"resources.limits.memory: {typical_limit_mib(600)}Mi" in remedy and "`--memory-limit" in remedy
    # memory at the limit is one finding held through the restarts, not one per cycle
    headroom = [c.change for c in changes if c.finding.id == "memory-headroom"]
    assert headroom.count(OPENED) == 1 and CLOSED not in headroom
    assert "memory-headroom" in found.open
    assert "apiserver-restarted" not in found.open  # said by the crash loop, not twice
    # quiet: served with no restart for the quiet period, then it closes (the restart finding stays)
    last = deaths_at[-1]
    quiet = Thresholds().crashloop_quiet_seconds
    deaths = [death(at) for at in deaths_at]
    assert found.observe(loop_sample(last + quiet - 5.0, deaths, down=False, rss=400 * MIB)) == []
    closing = found.observe(loop_sample(last + quiet + 5.0, deaths, down=False, rss=400 * MIB))
    assert [(c.change, c.finding.id) for c in closing if c.finding.id == CRASH_LOOP] == [(CLOSED, CRASH_LOOP)]
    assert "apiserver-restarted" in found.open


def test_while_the_server_stays_down_the_loop_stays_open():
    found = engine()
    deaths = [death(10.0 + CYCLE * i) for i in range(3)]
    assert CRASH_LOOP in {c.finding.id for c in found.observe(loop_sample(55.0, deaths, down=True, error="refused"))}
    # ten minutes later, still refused (the platform gave up restarting it): still a loop
    assert found.observe(loop_sample(700.0, deaths, down=True, error="refused")) == [] or CRASH_LOOP in found.open
    assert CRASH_LOOP in found.open


def test_restarts_spread_wider_than_the_window_are_no_loop():
    found = engine()
    window = Thresholds().crashloop_window_seconds
    deaths = [death(i * (window / 2 + 1), oom=False) for i in range(3)]  # 3 within 1 window + 2 s: not dense
    found.observe(loop_sample(deaths[-1].at + 10, deaths, down=False, rss=300 * MIB))
    assert CRASH_LOOP not in found.open
    assert "apiserver-restarted" in found.open


def test_a_server_killed_before_a_good_sample_saw_the_load_is_judged_on_the_crds_the_watch_saw():
    """The drill's 1-in-N: the first death came within one health interval of the load, so every
    good sample counted 0 CRDs; the failed samples carry the CRD watch's count, which saw them added."""
    found = engine()
    found.observe(loop_sample(0.0, [], down=False, rss=270 * MIB, crds=0))  # before the load
    deaths = [death(5.0 + 3.5 * i) for i in range(3)]  # each process lives ~3 s, never answers
    found.observe(loop_sample(15.0, deaths, down=True, error="connection refused", crds=450))
    finding = found.open[CRASH_LOOP]
    evidence = "\n".join(finding.evidence)
    need = startup_need(450, "1.37").total_bytes
    assert "health.crds = 450 (the CRD watch's count" in evidence and f"~{need / MIB:,.0f} MiB" in evidence
    assert named_limit(finding.remedy) == typical_limit_mib(450)

    unknown = engine()  # no count anywhere: no line, and no figure in the remedy
    unknown.observe(loop_sample(0.0, [], down=False, rss=270 * MIB, crds=0))
    unknown.observe(loop_sample(15.0, deaths, down=True, error="connection refused"))
    assert not any("cost model" in e for e in unknown.open[CRASH_LOOP].evidence)
    assert "raise the memory limit;" in unknown.open[CRASH_LOOP].remedy


def test_without_the_platforms_word_memory_near_the_limit_makes_oom_likely_and_without_it_none():
    def scraped(at: float, rss: int) -> RestartEvent:
        return RestartEvent(at, START_TIME, "r1", uptime_seconds=15.0, rss_bytes_at_death=rss)

    near = engine()
    deaths = [scraped(10.0 + CYCLE * i, 690 * MIB) for i in range(3)]
    near.observe(loop_sample(60.0, deaths, down=False, rss=350 * MIB))
    finding = near.open[CRASH_LOOP]
    assert "OOM-killed (likely)" in finding.title
    assert any("690, 690, 690 MiB" in e for e in finding.evidence)

    far = engine()
    deaths = [scraped(10.0 + CYCLE * i, 200 * MIB) for i in range(3)]
    far.observe(loop_sample(60.0, deaths, down=False, rss=210 * MIB))
    assert "OOM" not in far.open[CRASH_LOOP].title
    assert "logs" in far.open[CRASH_LOOP].remedy

    unknown = FindingsEngine()  # no limit known: no OOM verdict, and it says why
    unknown.observe(loop_sample(60.0, deaths, down=False, rss=210 * MIB))
    assert any("memory limit unknown" in e for e in unknown.open[CRASH_LOOP].evidence)


def test_headroom_holds_when_the_new_process_reports_before_its_restart_is_counted():
    """The first figures of a restarted server (a new start time, small) may come before any source
    counted the restart: the headroom finding must not close and reopen around it."""
    found = engine()
    changes = []
    for t, rss, start in ((0.0, 650, 1000.0), (5.0, 680, 1000.0), (10.0, 300, 1011.0), (15.0, 310, 1011.0)):
        changes += found.observe(HealthSample(timestamp=t, rss_bytes=rss * MIB, crds=600, start_time=start))
    headroom = [c.change for c in changes if c.finding.id == "memory-headroom"]
    assert headroom.count(OPENED) == 1 and CLOSED not in headroom and "memory-headroom" in found.open
    assert "the highest of the last" in found.open["memory-headroom"].evidence[0]


def test_headroom_holds_through_a_good_sample_without_a_memory_figure():
    """Seen in CI: between two OOM kills a fresh process answered the health checks before it served
    /metrics, a good sample without an RSS figure.  That says nothing of the memory: the finding holds."""
    found = engine()
    changes = []
    samples = ((0.0, 279, 1000.0), (10.0, 633, 1000.0), (21.0, 427, 1017.0), (32.0, 531, 1028.0),
               (44.0, None, None), (54.0, 540, 1050.0))
    for t, rss, start in samples:
        changes += found.observe(HealthSample(timestamp=t, rss_bytes=rss and rss * MIB, crds=600, start_time=start))
    headroom = [c.change for c in changes if c.finding.id == "memory-headroom"]
    assert headroom == [OPENED], headroom
    assert "memory-headroom" in found.open


def replica_death(at: float, replica: str) -> RestartEvent:
    return RestartEvent(at, IDENTITY_LEASE, replica)


def replicated_sample(now: float, deaths: list[RestartEvent]) -> HealthSample:
    return HealthSample(timestamp=now, down=False, rss_bytes=300 * MIB, crds=10, restarts=len(deaths),
                        restarts_source=IDENTITY_LEASE, restarts_by_source={IDENTITY_LEASE: len(deaths)},
                        restart_events=tuple(deaths), apiservers=3)


def test_a_rolling_restart_of_three_replicas_is_no_crash_loop():
    """Each replica replaced once, 28 s apart: three restarts within a minute, none of them a loop."""
    found = engine()
    deaths = [replica_death(100.0 + 28.0 * i, f"host-{i}") for i in range(3)]
    changes = []
    for t in range(100, 400, 5):
        changes += found.observe(replicated_sample(float(t), [d for d in deaths if d.at <= t]))
    assert [c for c in changes if c.finding.id == CRASH_LOOP] == []


def test_one_replica_that_keeps_dying_is_a_crash_loop_that_names_it():
    found = engine()
    deaths = [replica_death(100.0, "host-0")] + [replica_death(110.0 + 20.0 * i, "host-2") for i in range(3)]
    changes = []
    for t in range(100, 200, 5):
        changes += found.observe(replicated_sample(float(t), [d for d in deaths if d.at <= t]))
    opened = [c for c in changes if c.finding.id == CRASH_LOOP and c.change == OPENED]
    assert len(opened) == 1
    finding = opened[0].finding
    assert "(replica host-2)" in finding.title and "3 restarts" in finding.title, finding.title
    assert "host-0" not in finding.title
    assert any("host-0 1, host-2 3" in line for line in finding.evidence), finding.evidence


def synthetic_features(count: int) -> list:
    from crdscope.loader.synthetic import synthetic_documents

    return [features_of_spec(d["metadata"]["name"], d["spec"]) for d in synthetic_documents(count, schema_props=5)]


def watched(crds: list, now: float) -> InventorySample:
    """The inventory as the CRD watch counts these CRDs (served versions, schema bytes as sent)."""
    return InventorySample(timestamp=now, crds=len(crds), served_versions=sum(c.served for c in crds),
                           crd_schema_bytes=sum(c.schema_bytes for c in crds))


def test_the_cluster_s_own_crds_are_priced_as_estimate_prices_them():
    """With the CRD watch's counts, the need is the cluster's CRDs' own: the same upper end
    ``crdscope estimate`` gives for those CRDs on an empty cluster of that minor, on every minor."""
    crds = synthetic_features(300)  # small schemas: far cheaper than a real provider's typical CRD
    for minor in ("1.26", "1.30", "1.33", "1.37"):
        predicted = estimate(crds, minor).rss_after_bytes
        need = startup_need(len(crds), minor, served_versions=sum(c.served for c in crds),
                            schema_bytes=sum(c.schema_bytes for c in crds))
        assert need.own_terms and math.isclose(need.high_bytes, predicted.high, rel_tol=1e-9), minor
        assert math.isclose(need.total_bytes, predicted.value, rel_tol=1e-9), minor

    found = engine(ClusterFacts(lab_limit=LIMIT, lab=LabHooks(name="drill")))
    found.observe(watched(crds, 1.0))
    deaths = [death(5.0 + 3.5 * i) for i in range(3)]
    found.observe(loop_sample(15.0, deaths, down=True, error="connection refused", crds=300))
    finding = found.open[CRASH_LOOP]
    evidence = "\n".join(finding.evidence)
    assert "their own served versions and schema bytes" in evidence
    mib = math.ceil(estimate(crds, "1.37").rss_after_bytes.high * 1.3 / MIB)
    assert mib < typical_limit_mib(300)  # priced by what these CRDs are, not by a typical provider's
    assert f"at most ~{estimate(crds, '1.37').rss_after_bytes.high / MIB:,.0f} MiB" in evidence
    # The lab's cap: the exact command that raises it, with the lab's name.
    assert named_limit(finding.remedy) == mib
    assert f"`crdscope lab limit {mib}Mi --name drill`" in finding.remedy
    assert "now 700 MiB" in finding.remedy


def test_the_default_lab_s_command_names_no_lab_and_a_count_newer_than_the_inventory_scales_its_terms():
    crds = synthetic_features(200)
    found = engine(ClusterFacts(lab_limit=LIMIT, lab=LabHooks(name="")))
    found.observe(watched(crds, 1.0))
    deaths = [death(5.0 + 3.5 * i) for i in range(3)]
    # The health sample's count (the watch's, a moment later) is 400: the inventory's mean CRD, twice.
    found.observe(loop_sample(15.0, deaths, down=True, error="connection refused", crds=400))
    remedy = found.open[CRASH_LOOP].remedy
    twice = crds + [dataclasses.replace(c, name=f"copies.{c.name}") for c in crds]
    assert named_limit(remedy) == math.ceil(estimate(twice, "1.37").rss_after_bytes.high * 1.3 / MIB)
    assert f"`crdscope lab limit {named_limit(remedy)}Mi`" in remedy
