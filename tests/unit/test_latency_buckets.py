"""p99 per verb and scope from two real scrapes of the lab, against hand computations.

tests/data/request-sli-scrape-{1,2}.txt.xz are two /metrics answers of the lab
(kube-apiserver v1.37.2), cut down to apiserver_request_sli_duration_seconds:
the second was taken after 150 CRDs were applied with kubectl and a few reads,
a ConfigMap create and delete.  The expected figures below were computed by hand
from those files (bucket counts summed over resources with awk, then
differenced), not by the code under test.
"""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest

from crdscope.probes.latency import (DURATION_FAMILY, SLI_FAMILY, breaches, reduce_scrape, slo_seconds, slowest_resources,
                                    window_p99)
from crdscope.connection.metrics import parse_text

DATA = Path(__file__).resolve().parents[1] / "data"


def saved(n: int) -> str:
    return lzma.decompress((DATA / f"request-sli-scrape-{n}.txt.xz").read_bytes()).decode()


@pytest.fixture(scope="module")
def reduced_pair():
    family_1, older, _ = reduce_scrape(parse_text(saved(1), [SLI_FAMILY]))
    family_2, newer, _ = reduce_scrape(parse_text(saved(2), [SLI_FAMILY]))
    assert family_1 == family_2 == SLI_FAMILY
    return newer, older


def test_p99_per_verb_and_scope_matches_hand_computation(reduced_pair):
    by_verb, by_scope, counts = window_p99(*reduced_pair)
    # Request counts between the scrapes (+Inf bucket of scrape 2 minus scrape 1):
    # GET resource 471-170, LIST cluster 167-11, LIST namespace 3-0, POST resource 387-200,
    # PUT resource 350-42, DELETE resource 2-1; APPLY resource 18-18 = 0 is left out.
    assert counts == {"GET resource": 301, "LIST cluster": 156, "LIST namespace": 3,
                      "POST resource": 187, "PUT resource": 308, "DELETE resource": 1}
    # PUT resource: rank 0.99*308 = 304.92 lies between le=0.05 (291) and le=0.1 (306):
    # 0.05 + 0.05 * (304.92 - 291) / (306 - 291) = 0.0964
    assert by_scope["PUT resource"] == pytest.approx(0.0964)
    # POST resource: rank 185.13 between le=0.05 (180) and le=0.1 (187): 0.05 + 0.05 * 5.13 / 7
    assert by_scope["POST resource"] == pytest.approx(0.05 + 0.05 * 5.13 / 7)
    # GET resource: rank 297.99 inside the first bucket (le=0.05 holds 299): 0.05 * 297.99 / 299
    assert by_scope["GET resource"] == pytest.approx(0.05 * 297.99 / 299)
    # LIST cluster: 156 all under 0.05: 0.05 * 154.44 / 156 = 0.0495
    assert by_scope["LIST cluster"] == pytest.approx(0.0495)
    # Per verb, scopes are added first: LIST = 156 + 3 = 159 requests, all under 0.05.
    assert by_verb["LIST"] == pytest.approx(0.05 * (0.99 * 159) / 159)
    assert by_verb["PUT"] == pytest.approx(0.0964)
    assert "APPLY" not in by_verb


def test_non_resource_requests_and_watches_have_no_entry(reduced_pair):
    newer, _ = reduced_pair
    # /livez, /readyz, /metrics are GETs with an empty scope: not API calls the SLOs cover.
    assert all(" " in name and name.split(" ")[1] for name in newer)
    assert not any(name.startswith(("WATCH", "CONNECT")) for name in newer)


def test_a_counter_reset_uses_the_newer_counts_alone(reduced_pair):
    newer, older = reduced_pair
    # Compared the wrong way round every series went down, as after an API server restart:
    # the window then holds what the newer (restarted) process counted. Scrape 1 had 42 PUTs,
    # all under 0.05: 0.05 * 0.99 * 42 / 42 = 0.0495.
    _, by_scope, counts = window_p99(older, newer)
    assert counts["PUT resource"] == 42
    assert by_scope["PUT resource"] == pytest.approx(0.0495)


def test_the_plain_duration_family_is_used_when_the_sli_one_is_absent():
    renamed = saved(2).replace(SLI_FAMILY, DURATION_FAMILY)
    family, reduced, _ = reduce_scrape(parse_text(renamed, [SLI_FAMILY, DURATION_FAMILY]))
    assert family == DURATION_FAMILY
    assert reduced["PUT resource"][-1] == (float("inf"), 350.0)


def test_slos_follow_the_kubernetes_definitions():
    assert slo_seconds("GET", "resource") == 1.0
    assert slo_seconds("APPLY", "resource") == 1.0
    assert slo_seconds("DELETE", "resource") == 1.0
    assert slo_seconds("LIST", "namespace") == 5.0
    assert slo_seconds("LIST", "cluster") == 30.0
    assert slo_seconds("DELETECOLLECTION", "namespace") is None
    slos, over = breaches({"GET resource": 0.2, "POST resource": 1.3, "LIST namespace": 5.0,
                           "LIST cluster": 31.0, "DELETECOLLECTION namespace": 99.0})
    assert over == ("LIST cluster", "POST resource")
    assert slos == {"GET resource": 1.0, "LIST cluster": 30.0, "LIST namespace": 5.0, "POST resource": 1.0}


def sli_scrape(get_widgets_slow: int, get_widgets_fast: int, get_namespaces: int) -> str:
    """An exposition of the SLI family: GETs of widgets (two versions, split between them) and of
    namespaces (all under 0.05 s), with the buckets around the 1 s SLO."""
    lines = []

    def histogram(labels: str, fast: int, slow: int) -> None:
        for bound, count in (("0.05", fast), ("1", fast), ("1.5", fast), ("2", fast + slow), ("+Inf", fast + slow)):
            lines.append(f'{SLI_FAMILY}_bucket{{{labels},le="{bound}"}} {count}')

    widgets = 'component="apiserver",group="webhooks.example.io",resource="widgets",scope="resource",subresource=""'
    histogram(f'{widgets},verb="GET",version="v1"', get_widgets_fast, 0)
    histogram(f'{widgets},verb="GET",version="v1beta1"', 0, get_widgets_slow)
    histogram('component="apiserver",group="",resource="namespaces",scope="resource",subresource="",verb="GET",'
              'version="v1"', get_namespaces, 0)
    histogram('component="apiserver",group="",resource="pods",scope="resource",subresource="status",verb="GET",'
              'version="v1"', 0, get_widgets_slow // 3)
    return "\n".join(lines) + "\n"


def test_a_breach_names_the_resources_with_the_most_requests_over_the_slo():
    # Counted by hand: between the scrapes 30 - 10 = 20 slow widgets reads (v1beta1, 1.5-2 s), 10 - 3 = 7 slow
    # pod status reads; 40 fast reads of widgets (v1) and 100 of namespaces; GET resource p99 of 167 requests
    # lies in the 1.5-2 s bucket.
    _, older, older_over = reduce_scrape(parse_text(sli_scrape(10, 10, 50), [SLI_FAMILY]))
    _, newer, newer_over = reduce_scrape(parse_text(sli_scrape(30, 50, 150), [SLI_FAMILY]))
    assert newer_over == {"GET resource widgets.webhooks.example.io": 30.0, "GET resource pods/status": 10.0}
    _, by_scope, counts = window_p99(newer, older)
    assert counts["GET resource"] == 20 + 40 + 100 + 7 and 1.5 < by_scope["GET resource"] <= 2.0
    _, over = breaches(by_scope)
    assert over == ("GET resource",)
    named = slowest_resources(newer_over, older_over, over)
    assert named == {"GET resource widgets.webhooks.example.io": 20, "GET resource pods/status": 7}
    assert list(named) == ["GET resource widgets.webhooks.example.io", "GET resource pods/status"]
    # Nothing is named for a verb and scope that does not breach, and a counter reset keeps the newer counts.
    assert slowest_resources(newer_over, older_over, ()) == {}
    assert slowest_resources(older_over, newer_over, over) == {"GET resource widgets.webhooks.example.io": 10,
                                                                "GET resource pods/status": 3}


def test_config_toml_sets_the_window_the_p99s_span(tmp_path):
    from types import SimpleNamespace

    from crdscope.base.settings import load_settings
    from crdscope.probes.latency import WINDOW_SECONDS, make_probe

    class Wanting:
        def want(self, *families: str) -> None:
            self.families = families

    def probe_of(settings):
        return make_probe(SimpleNamespace(cluster=None, metrics=Wanting(), settings=settings))  # type: ignore[arg-type]

    config = tmp_path / "config.toml"
    config.write_text("[cadences]\nlatency = 5\n")
    assert probe_of(load_settings(config)).window == WINDOW_SECONDS == 300.0  # the SLOs' 5 minutes
    config.write_text("[cadences]\nlatency_window = 30\n")
    assert probe_of(load_settings(config)).window == 30.0
