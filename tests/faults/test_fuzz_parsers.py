"""Fuzzing the parsers of what crdscope reads from outside, with hypothesis.

Discovery documents and ``/metrics`` text are fed through the probes' own
code paths (the shared client with an ``httpx.MockTransport``: the only way
to serve a malformed answer on demand); CRD YAML through the loader's source
parser; recordings through the replay reader.

Proves, for arbitrary and near-valid input: no exception escapes as a crash.
A malformed answer becomes an error sample (or a scrape error); a malformed
CRD document becomes a reported item (SourceProblem) while the others still
parse; a damaged recording replays up to the damage or is refused with one
line (CrdscopeError).  One property on top: how ``/metrics`` is cut into
chunks never changes what is parsed.

Budgets stay small for CI (``max_examples`` 200 or fewer, no deadline).
"""

from __future__ import annotations

import asyncio
import json
import os
import string

import httpx
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from crdscope.loader.sources import CRDDocument, SourceProblem, document_items, yaml_items
from crdscope.connection.cluster import Cluster, ClusterConfig
from crdscope.probes.discovery import DiscoveryProbe
from crdscope.base.samples.discovery import DiscoverySample
from crdscope.base.errors import CrdscopeError
from crdscope.connection.metrics import MetricsParser, MetricsSource, parse_text
from crdscope.probes.registry import monitor_probes, sample_type
from crdscope.session.recorder import ClusterInfo, header_record
from crdscope.session.replay import read_recording

FUZZ = settings(max_examples=int(os.environ.get("CRDSCOPE_FUZZ_EXAMPLES", "200")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20)


_STAND_IN: list[Cluster] = []


def stand_in(handler) -> Cluster:
    """A Cluster whose shared client answers with ``handler`` (httpx.MockTransport).

    One Cluster serves every example (building TLS contexts per example would spend the
    budget on set-up); the mock transport keeps no connections between event loops.
    """
    if not _STAND_IN:
        _STAND_IN.append(Cluster(ClusterConfig(server="https://fuzz.invalid", context="fuzz", user="",
                                               kubeconfig=())))
    cluster = _STAND_IN[0]
    cluster.transport.primary = httpx.MockTransport(handler)
    return cluster


# --------------------------------------------------------------------------- discovery


def discovery_document(names: st.SearchStrategy) -> st.SearchStrategy:
    """Aggregated discovery documents, valid in shape, with fuzzed values where ``names`` says."""
    resource = st.fixed_dictionaries({
        "resource": names, "responseKind": st.fixed_dictionaries({"group": names, "version": names, "kind": names}),
        "scope": st.sampled_from(["Cluster", "Namespaced", "", "Weird"]), "verbs": st.lists(names, max_size=3)},
        optional={"subresources": st.lists(json_values, max_size=2), "singularResource": json_values})
    version = st.fixed_dictionaries({"version": names, "resources": st.lists(resource | json_values, max_size=3)},
                                    optional={"freshness": st.sampled_from(["Current", "Stale", 7])})
    group = st.fixed_dictionaries({"metadata": st.fixed_dictionaries({"name": names}) | json_values,
                                   "versions": st.lists(version | json_values, max_size=3)})
    return st.fixed_dictionaries({"apiVersion": st.just("apidiscovery.k8s.io/v2"),
                                  "kind": st.just("APIGroupDiscoveryList"),
                                  "items": st.lists(group | json_values, max_size=4) | json_values})


bodies = (discovery_document(st.text(max_size=12) | json_values).map(lambda d: json.dumps(d).encode())
          | json_values.map(lambda d: json.dumps(d).encode()) | st.binary(max_size=300))


@FUZZ
@given(api=bodies, apis=bodies, content_type=st.sampled_from([AGGREGATED, "application/json", "text/html", None]),
       status=st.sampled_from([200, 200, 200, 304, 404, 406, 500]))
@example(  # found by CI: a group whose metadata is a number
    api=b'{"apiVersion": "apidiscovery.k8s.io/v2", "kind": "APIGroupDiscoveryList", "items": []}',
    apis=b'{"apiVersion": "apidiscovery.k8s.io/v2", "kind": "APIGroupDiscoveryList", '
         b'"items": [{"metadata": 1, "versions": []}]}',
    content_type=AGGREGATED, status=200)
def test_discovery_answers_become_samples(api, apis, content_type, status):
    def answer(request: httpx.Request) -> httpx.Response:
        headers = {"Content-Type": content_type} if content_type else {}
        body = api if request.url.path == "/api" else apis
        return httpx.Response(status, headers=headers, content=body)

    async def observe() -> DiscoverySample:
        return await DiscoveryProbe(stand_in(answer)).observe("aggregated")

    sample = asyncio.run(observe())
    assert isinstance(sample, DiscoverySample)
    assert sample.error is None or "\n" not in sample.error


# --------------------------------------------------------------------------- /metrics

metric_lines = st.lists(st.one_of(
    st.text(alphabet=string.printable, max_size=60),
    st.builds(lambda name, labels, value: f"{name}{{{labels}}} {value}",
              st.sampled_from(["process_resident_memory_bytes", "go_goroutines", "apiserver_x_bucket", "a"]),
              st.text(alphabet='a=",\\{} le+Inf0.5', max_size=30),
              st.sampled_from(["1", "NaN", "+Inf", "-Inf", "1e9", "x", "", "1 2 3"])),
    st.sampled_from(["# TYPE go_goroutines gauge", "# HELP x y", "#", "", "{", "}", " 1", "\r"])), max_size=40)


@FUZZ
@given(lines=metric_lines, cuts=st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=30))
def test_metrics_text_parses_the_same_however_it_is_cut(lines, cuts):
    data = "\n".join(lines).encode()
    whole = parse_text(data)
    parser = MetricsParser()
    position, index = 0, 0
    while position < len(data):
        size = cuts[index % len(cuts)]
        parser.feed(data[position:position + size])
        position += size
        index += 1
    parser.close()
    assert {k: repr(list(v)) for k, v in parser.samples.items()} == \
        {k: repr(list(v)) for k, v in whole.samples.items()}


@FUZZ
@given(body=st.binary(max_size=2000) | metric_lines.map(lambda lines: "\n".join(lines).encode()),
       status=st.sampled_from([200, 200, 403, 500]))
def test_metrics_answers_become_scrapes(body, status):
    async def scrape():
        cluster = stand_in(lambda request: httpx.Response(status, content=body))
        return await MetricsSource(cluster, ("go_goroutines", "process_resident_memory_bytes")).scrape()

    result = asyncio.run(scrape())
    assert result.ok == (status == 200), result.error


# --------------------------------------------------------------------------- CRD YAML

yaml_fragments = st.lists(st.one_of(
    st.text(max_size=40),
    st.sampled_from(["---", "apiVersion: apiextensions.k8s.io/v1", "kind: CustomResourceDefinition",
                     "kind: CustomResourceDefinitionList", "items:", "- a", "metadata:", "  name: x.y.z",
                     "  name: [", "spec:", "  group: y.z", "  names: {kind: X}", "  - : :", "\t", "key: 'unclosed",
                     "&a [*a]", "!!python/object:os.system", "%YAML 1.1", "... ", "{", "name: 2020-01-01"])),
    max_size=30)


@FUZZ
@given(fragments=yaml_fragments)
def test_crd_yaml_becomes_items_or_reported_problems(fragments):
    text = "\n".join(fragments).encode("utf-8", "surrogatepass")
    for item in yaml_items(text.splitlines(keepends=True), "fuzz.yaml"):
        assert isinstance(item, (CRDDocument, SourceProblem))
        if isinstance(item, CRDDocument):
            item.apply_body(run_id="fuzz", resource_version="1")  # what would be sent is well formed
        else:
            assert item.origin.startswith("fuzz.yaml") and item.reason


@FUZZ
@given(document=json_values | st.fixed_dictionaries(
    {"apiVersion": st.sampled_from(["apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1", 3]),
     "kind": st.sampled_from(["CustomResourceDefinition", "CustomResourceDefinitionList", "List", None])},
    optional={"metadata": json_values, "spec": json_values, "items": st.lists(json_values, max_size=3)}))
def test_parsed_documents_become_items_or_reported_problems(document):
    for item in document_items(document, "doc"):
        assert isinstance(item, (CRDDocument, SourceProblem))


# --------------------------------------------------------------------------- recordings

probe_names = st.sampled_from([*monitor_probes(), "loader", "no-such-probe"])


def sample_data(probe: str) -> st.SearchStrategy:
    """A sample's JSON with its real field names and fuzzed values."""
    import dataclasses

    fields = [f.name for f in dataclasses.fields(sample_type(probe))] if probe in monitor_probes() else ["x"]
    return st.dictionaries(st.sampled_from(fields), json_values, max_size=6)


records = st.one_of(
    probe_names.flatmap(lambda probe: sample_data(probe).map(
        lambda data: json.dumps({"type": "sample", "probe": probe, "data": data}).encode())),
    json_values.map(lambda data: json.dumps({"type": "event", "data": data}).encode()),
    st.sampled_from([b'{"type": "end", "reason": "closed"}', b'{"type": "end", "reason": "rotated"}',
                     b'{"type": "later-kind"}', b"", b"{", b"\xff\xfe", b"[]", b'{"type": 3}']),
    st.binary(max_size=40))


@FUZZ
@given(lines=st.lists(records, max_size=12), torn=st.booleans(), header=st.sampled_from(["ok", "newer", "none"]))
def test_damaged_recordings_replay_up_to_the_damage_or_are_refused(tmp_path_factory, lines, torn, header):
    path = tmp_path_factory.mktemp("fuzz") / "recording.jsonl"
    first = header_record(ClusterInfo(server="https://s", context="c"), "fuzz", 1, 0.0)
    if header == "newer":
        first["format_version"] = 99
    head = json.dumps(first).encode() + b"\n" if header != "none" else b"not a header\n"
    body = b"\n".join(lines) + (b"" if torn else b"\n")
    path.write_bytes(head + body)
    try:
        recording = read_recording(path)
    except CrdscopeError as exc:
        assert header != "ok" and "\n" not in str(exc)
        return
    assert header == "ok"
    assert all(isinstance(s.timestamp, float) for s in recording.samples)
    if recording.damage is not None:
        assert recording.damage.message()
