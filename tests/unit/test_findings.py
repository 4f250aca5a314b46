"""The findings engine on constructed samples: transitions once each, evidence names its figures."""

from __future__ import annotations

import dataclasses

from crdscope.base.facts import ClusterFacts, LimitOrigin, MemoryLimit
from crdscope.findings.engine import FindingsEngine
from crdscope.findings.model import CLOSED, OPENED, Finding, FindingChange, Severity
from crdscope.base.samples.throttling import FlowSchemaActivity, PriorityLevel, ThrottlingSample
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.latency import Canary, LatencySample
from crdscope.base.samples.responsiveness import ResponsivenessSample
from crdscope.base.settings import Thresholds
from crdscope.session.core import SessionStore, WatchCore


def waiting(at: float, seconds: float, request: str = "GET /readyz") -> ResponsivenessSample:
    return ResponsivenessSample(timestamp=at, in_flight=3 if seconds else 0, oldest_request_seconds=seconds,
                                oldest_request=request if seconds else "", unanswered_seconds=seconds)


def test_a_hang_opens_once_when_a_request_waits_past_the_threshold_and_closes_with_its_duration():
    engine = FindingsEngine(Thresholds(unanswered_seconds_critical=5.0))
    changes = []
    for second in range(20):  # the request waits from t=100 to t=120, evaluated every second
        changes += engine.observe(waiting(100.0 + second, float(second)))
    opened = [c for c in changes if c.change == OPENED]
    assert len(opened) == 1 and opened[0].timestamp == 106.0  # first sample over 5 s (6 s waited)
    finding = opened[0].finding
    assert finding.severity is Severity.CRITICAL and finding.since == 100.0  # when the request was sent
    assert any("GET /readyz" in e and "responsiveness.oldest_request_seconds" in e for e in finding.evidence)
    closing = engine.observe(waiting(121.0, 0.0))
    assert [c.change for c in closing] == [CLOSED]
    assert closing[0].duration_seconds == 21.0
    assert "finding closed after 21.0 s" in closing[0].line()
    assert engine.observe(waiting(122.0, 0.0)) == []


def test_refused_connections_count_as_not_answering_too():
    engine = FindingsEngine()
    sample = ResponsivenessSample(timestamp=50.0, unanswered_seconds=6.0, last_failure="ConnectError")
    (change,) = engine.observe(sample)
    assert change.finding.title.startswith("API server unreachable")


def test_a_19_second_version_canary_is_a_latency_finding_not_slos_met():
    canary = Canary(path="/version", seconds=0.01, slo_seconds=None, p99_seconds=19.09, count=20)
    fine = Canary(path="/api/v1/namespaces/default", seconds=0.01, slo_seconds=1.0, p99_seconds=0.02, count=20)
    sample = LatencySample(timestamp=10.0, canaries={"version": canary, "get_namespace": fine},
                           p99_by_verb_scope={"LIST cluster": 31.0}, slo_seconds={"LIST cluster": 30.0},
                           slo_breaches=("LIST cluster",), requests_by_verb_scope={"LIST cluster": 12},
                           server_family="apiserver_request_sli_duration_seconds", window_seconds=300.0)
    found = {c.finding.id: c.finding for c in FindingsEngine().observe(sample)}
    assert set(found) == {"latency-slo:canary version", "latency-slo:LIST cluster"}
    assert "19.1 s" in found["latency-slo:canary version"].title
    assert "GET" in found["latency-slo:canary version"].title
    assert "LIST cluster" in found["latency-slo:LIST cluster"].title


def test_apf_rejections_name_the_priority_level_and_flow_schema():
    level = PriorityLevel(name="squeezed", rejected=30, rejected_per_s=3.0, rejected_by_reason={"queue-full": 30},
                          limit_seats=1, executing_seats=1)
    schema = FlowSchemaActivity(name="crdscope-squeeze", priority_level="squeezed", rejected=30, rejected_per_s=3.0)
    sample = ThrottlingSample(timestamp=1.0, interval_seconds=10.0, priority_levels=(level,), flow_schemas=(schema,))
    (change,) = FindingsEngine(Thresholds(apf_rejected_per_second_critical=10.0)).observe(sample)
    assert change.finding.id == "apf-rejecting:squeezed" and change.finding.severity is Severity.WARNING
    assert "squeezed" in change.finding.title
    assert any("crdscope-squeeze" in e for e in change.finding.evidence)


def test_memory_per_crd_reads_the_threshold_setting():
    sample = HealthSample(timestamp=1.0, mib_per_crd=2.5, r2=0.97, crds=500, fit_points=12, fit_crd_counts=5)
    assert FindingsEngine(Thresholds(memory_mib_per_crd_warn=3.0)).observe(sample) == []
    (change,) = FindingsEngine(Thresholds(memory_mib_per_crd_warn=2.0)).observe(sample)
    assert change.finding.id == "memory-per-crd" and "2.50 MiB per CRD" in change.finding.title


def test_severity_change_is_one_transition_and_a_failed_sample_does_not_close_a_finding():
    engine = FindingsEngine(Thresholds(apf_rejected_per_second_critical=2.0))

    def throttling(at: float, rate: float, error: str | None = None) -> ThrottlingSample:
        level = PriorityLevel(name="workload-low", rejected=int(rate * 10), rejected_per_s=rate)
        return ThrottlingSample(timestamp=at, interval_seconds=10.0, priority_levels=(level,), error=error)

    assert [c.change for c in engine.observe(throttling(1, 1.0))] == [OPENED]
    assert [c.change for c in engine.observe(throttling(2, 5.0))] == ["changed"]
    assert engine.current()[0].severity is Severity.CRITICAL and engine.current()[0].since == 1
    assert engine.observe(throttling(3, 0.0, error="scrape failed")) == []
    assert [c.change for c in engine.observe(throttling(4, 0.0))] == [CLOSED]


def test_findings_survive_a_json_round_trip():
    finding = Finding("x:y", Severity.WARNING, "t", ("a = 1",), "c", "r", since=3.0)
    change = FindingChange(4.0, OPENED, finding)
    assert FindingChange.from_json(change.to_json()) == change


def test_unused_crds_count_from_object_counts_with_the_memory_they_hold():
    sample = HealthSample(timestamp=1.0, crds=2065, crds_without_objects=1950, mib_per_crd=3.0, r2=0.5,
                          unused_crd_examples=("buckets.s3.aws.upbound.io",))
    (change,) = FindingsEngine().observe(sample)
    finding = change.finding
    assert finding.id == "unused-crds" and finding.severity is Severity.INFO
    assert finding.title == "1,950 of 2,065 CRDs have no objects"
    assert "about 5,850 MiB" in finding.remedy and "ManagedResourceActivationPolicy" in finding.remedy
    assert FindingsEngine().observe(HealthSample(timestamp=1.0, crds=50, crds_without_objects=50)) == []


def test_unused_crds_stand_through_a_sample_that_could_not_count_objects():
    """A fresh process answering before it serves /metrics has no object counts: the finding holds,
    and closes once a sample with counts says so."""
    engine = FindingsEngine()
    changes = engine.observe(HealthSample(timestamp=1.0, crds=2065, crds_without_objects=1950))
    changes += engine.observe(HealthSample(timestamp=11.0, crds=2065))
    assert [c.change for c in changes] == [OPENED] and "unused-crds" in engine.open
    changes = engine.observe(HealthSample(timestamp=21.0, crds=2065, crds_without_objects=10))
    assert [c.change for c in changes] == [CLOSED]


def test_the_kubectl_finding_estimates_a_legacy_walk_behind_its_limits():
    from crdscope.findings.kubectl import KubectlClient, parse_client_version
    from crdscope.findings.kubectl_discovery import kubectl_check
    from crdscope.base.samples.discovery import ClientModel, DiscoverySample

    old = parse_client_version('{"clientVersion": {"major": "1", "minor": "23+", "gitVersion": "v1.23.17"}}', "kubectl")
    assert old == KubectlClient("kubectl", "v1.23.17", 1, 23)
    assert (old.qps, old.burst, old.cache_ttl_seconds, old.aggregated_versions) == (5.0, 100, 600.0, ())
    discovery = DiscoverySample(timestamp=1.0, mode="aggregated", format="v2", group_versions=400,
                                client_models=(ClientModel("kubectl <= 1.23", 5.0, 100, 61.2, 58.0),))
    engine = FindingsEngine(checks_=[kubectl_check])
    engine.observations.kubectl = old
    (change,) = engine.observe(discovery)
    assert change.finding.severity is Severity.WARNING and "61.2 s" in change.finding.title
    assert "10 minutes" in change.finding.title
    assert any("2 + 400 requests" in e for e in change.finding.evidence)


def test_a_real_kubectl_run_beats_the_model_and_an_unfinished_one_is_a_lower_bound():
    from crdscope.findings.kubectl import KubectlClient, KubectlMeasurement
    from crdscope.findings.kubectl_discovery import kubectl_check
    from crdscope.base.samples.discovery import DiscoverySample

    new = KubectlClient("kubectl", "v1.32.4", 1, 32)
    discovery = DiscoverySample(timestamp=1.0, mode="aggregated", format="v2", group_versions=400, cold_seconds=0.25)

    def finding(measured):
        engine = FindingsEngine(checks_=[kubectl_check])
        engine.observations.kubectl, engine.observations.kubectl_measured = new, measured
        (change,) = engine.observe(discovery)
        return change.finding

    modelled = finding(None)
    assert "about 0.25 s (fine)" in modelled.title and not any("measured:" in e for e in modelled.evidence)
    real = finding(KubectlMeasurement(seconds=0.99))
    assert "about 0.99 s (fine)" in real.title
    assert any(e.startswith("measured: ") and "0.99 s" in e for e in real.evidence)
    assert any(e.startswith("modelled: ") and "0.25 s" in e for e in real.evidence)  # both, to compare
    slow = finding(KubectlMeasurement(unfinished_after=30.0))
    assert slow.severity is Severity.WARNING and "about 30.0 s (slow)" in slow.title
    failed = finding(KubectlMeasurement(error="kubectl api-resources failed: Unauthorized"))
    assert "0.25 s" in failed.title and any("not measured: " in e for e in failed.evidence)


def test_memory_headroom_needs_a_known_limit_and_rises_to_critical():
    limit = 1000 * 2**20
    assert not [f for f in FindingsEngine().observe(HealthSample(timestamp=1.0, rss_bytes=int(0.9 * limit), crds=10))
                if f.finding.id == "memory-headroom"]  # no limit known: no verdict
    engine = FindingsEngine(facts=ClusterFacts(flag_limit=limit))
    assert engine.observe(HealthSample(timestamp=1.0, rss_bytes=int(0.7 * limit), crds=10)) == []
    opened = engine.observe(HealthSample(timestamp=2.0, rss_bytes=int(0.85 * limit), crds=10))
    assert [(c.change, c.finding.severity.value) for c in opened] == [("opened", "warning")]
    assert "85% of its 1,000 MiB limit" in opened[0].finding.title
    worse = engine.observe(HealthSample(timestamp=3.0, rss_bytes=int(0.97 * limit), crds=10))
    assert [c.finding.severity.value for c in worse] == ["critical"]


def test_memory_headroom_uses_the_limit_prometheus_shows_unless_one_is_given():
    limit = 1000 * 2**20
    where = {"memory_limit_bytes": 'prometheus: kube_pod_container_resource_limits{container="kube-apiserver"}'}
    shown = HealthSample(timestamp=1.0, rss_bytes=int(0.9 * limit), crds=10, memory_limit_bytes=limit, sources=where)
    # The core hands the limit the health probe observed to its facts, which weigh it.
    core = WatchCore(None, store=SessionStore())
    (opened,) = core.take(shown).changes
    assert "90% of its 1,000 MiB limit" in opened.finding.title
    assert "kube_pod_container_resource_limits" in opened.finding.evidence[0]
    assert core.facts.memory_limit == MemoryLimit(limit, LimitOrigin.PROMETHEUS, where["memory_limit_bytes"])
    # --memory-limit wins: 2,000 MiB leaves this server at 45%, no finding; so does a lab's cap.
    assert WatchCore(None, store=SessionStore(), facts=ClusterFacts(flag_limit=2 * limit)).take(shown).changes == ()
    assert WatchCore(None, store=SessionStore(), facts=ClusterFacts(lab_limit=2 * limit)).take(shown).changes == ()


def test_a_server_side_breach_names_the_verb_and_the_resources_behind_it():
    sample = LatencySample(timestamp=10.0, p99_by_verb_scope={"GET resource": 1.62}, slo_seconds={"GET resource": 1.0},
                           slo_breaches=("GET resource",), requests_by_verb_scope={"GET resource": 167},
                           requests_over_slo={"GET resource widgets.webhooks.example.io": 20,
                                              "GET resource pods/status": 7},
                           server_family="apiserver_request_sli_duration_seconds", window_seconds=300.0)
    (change,) = FindingsEngine().observe(sample)
    finding = change.finding
    assert finding.id == "latency-slo:GET resource"  # one finding per verb and scope, whatever the resources
    assert finding.title == ("GET resource requests to widgets.webhooks.example.io, pods/status: server-side p99 "
                             "1.62 s over the 1 s SLO")
    assert any("widgets.webhooks.example.io 20, pods/status 7 requests over the 1 s SLO" in e
               for e in finding.evidence), finding.evidence
    assert "conversion webhook" in finding.cause and "admission webhooks and APF queueing are not" in finding.cause
    # A recording made before the resources were counted: the verb and scope alone, as before.
    (change,) = FindingsEngine().observe(dataclasses.replace(sample, requests_over_slo={}))
    assert change.finding.title == "GET resource requests: server-side p99 1.62 s over the 1 s SLO"


def test_a_resource_canary_names_its_resource():
    slow = Canary(path="/apis/example.io/v1/widgets?limit=1", seconds=40.0, slo_seconds=30.0, p99_seconds=40.0,
                  count=3)
    sample = LatencySample(timestamp=10.0, canaries={"list_cr": slow}, cr_resource="widgets.example.io")
    (change,) = FindingsEngine().observe(sample)
    assert change.finding.title.startswith("slow requests: LIST cluster widgets.example.io canary list_cr p99 40.0 s")
