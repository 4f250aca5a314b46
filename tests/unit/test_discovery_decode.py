"""The fast aggregated-discovery decoder against the reference reader (parse_aggregated).

Whatever the document, both must agree: the same DiscoveredAPIs for a good one, the
same error for a bad one (the fast path hands what it refuses to the reference reader).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crdscope.connection.discovery_decode import decode_aggregated
from crdscope.connection.discovery_docs import decode_in_pieces, parse_aggregated
from tests.helpers import LoopTurns
from tests.unit.discovery_documents import APIS, CORE, group, resource


async def reference(raw: bytes, where: str = "/apis"):
    return parse_aggregated(await decode_in_pieces(raw), where)


async def outcome(decoder, raw: bytes):
    try:
        return ("ok", await decoder(raw, "/apis"))
    except ValueError as exc:
        return ("error", type(exc).__name__, str(exc))


@pytest.mark.parametrize("document", [APIS, CORE, {"items": []}, {}, {"items": None}])
async def test_good_documents_parse_the_same(document):
    raw = json.dumps(document).encode()
    assert await decode_aggregated(raw, "/apis") == await reference(raw)


@pytest.mark.parametrize("raw", [
    b"{not json", b"[1, 2, 3]", b'{"items": {"not": "a list"}}', b'{"items": [1]}',
    b'{"items": [{"metadata": {"name": 7}}]}', b'{"items": [{"metadata": "x"}]}',
    b'{"items": [{"versions": [{"resources": []}]}]}',
    b'{"items": [{"versions": [{"version": "v1", "resources": [{"resource": ""}]}]}]}',
    b'{"items": [{"versions": [{"version": "v1", "resources": [{"resource": "a", "subresources": [{}]}]}]}]}',
    b'{"items": [{"versions": [{"version": "v1", "freshness": 3, "resources": [{"resource": "a", '
    b'"responseKind": "odd", "verbs": 0}]}]}]}',
])
async def test_odd_documents_end_as_the_reference_reader_ends(raw):
    assert await outcome(decode_aggregated, raw) == await outcome(
        lambda body, where: reference(body, where), raw)


json_values = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=3),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                        max_size=3), max_leaves=8)
fields = st.sampled_from(["metadata", "name", "versions", "version", "freshness", "resources", "resource",
                          "responseKind", "kind", "verbs", "subresources", "subresource", "items"])
shaped = st.recursive(json_values, lambda inner: st.dictionaries(fields, inner, max_size=4) | st.lists(inner,
                                                                                                       max_size=3),
                      max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.just("items"), shaped, max_size=1))
def test_fuzzed_documents_agree(document):
    raw = json.dumps(document).encode()
    assert asyncio.run(outcome(decode_aggregated, raw)) == asyncio.run(
        outcome(lambda body, where: reference(body, where), raw))


async def test_a_big_document_lets_the_event_loop_run():
    items = [group(f"g{i}.example.test", ("v1", [resource(f"things{j}") for j in range(5)], "Current"))
             for i in range(3000)]
    raw = json.dumps({"kind": "APIGroupDiscoveryList", "items": items}).encode()  # about 2 MB
    async with LoopTurns() as turns:
        decoded = await decode_aggregated(raw, "/apis")
    during = turns.count
    assert decoded == await reference(raw)
    assert during >= len(raw) // (1 << 16) - 1 > 20
