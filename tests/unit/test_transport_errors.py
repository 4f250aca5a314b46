"""Every exception a dying connection can raise is a transport failure: a retry in the loader,
an error sample in a probe, a one-line ClusterError elsewhere; never an escaping exception.

The exceptions are injected through httpx.MockTransport, which hands them to the client
unwrapped, as httpcore does with ``anyio.EndOfStream`` on an HTTP/2 write (the lab's
restart-mid-load test, tests/e2e/test_loader.py, shows the real one)."""

from __future__ import annotations

import asyncio
import ssl
import types

import anyio
import h2.exceptions
import httpcore
import httpx
import pytest

from crdscope.loader.apply import Applier
from crdscope.loader.safety import CREATE_ONLY
from crdscope.loader.sources import document_items
from crdscope.connection.cluster import Cluster, explain
from crdscope.base.errors import ClusterError
from crdscope.probes.health_checks import count_crds, health_check
from crdscope.probes.version import probe_version
from tests.crdsets import tiny_crd

SERVER = "https://lab.invalid"

#: One instance of each kind, as raised on a connection the server closed or reset.
DYING_CONNECTION = [
    anyio.EndOfStream(),
    anyio.BrokenResourceError(),
    anyio.ClosedResourceError(),
    h2.exceptions.ProtocolError("Invalid input ConnectionInputs.SEND_HEADERS in state ConnectionState.CLOSED"),
    h2.exceptions.StreamClosedError(1),
    ssl.SSLEOFError(8, "EOF occurred in violation of protocol"),
    ssl.SSLZeroReturnError(6, "TLS/SSL connection has been closed"),
    ConnectionResetError(104, "Connection reset by peer"),
    BrokenPipeError(32, "Broken pipe"),
    httpcore.ReadError("unwrapped"),
    httpcore.RemoteProtocolError("Server disconnected"),
    httpx.ReadError("Server disconnected"),
    httpx.RemoteProtocolError("peer closed connection"),
    httpx.WriteError("broken pipe"),
]
IDS = [f"{type(e).__module__.split('.')[0]}.{type(e).__name__}" for e in DYING_CONNECTION]


def mock_cluster(handler) -> types.SimpleNamespace:
    return types.SimpleNamespace(server=SERVER, client=httpx.AsyncClient(base_url=SERVER,
                                                                         transport=httpx.MockTransport(handler)))


def failing_first(exc: BaseException, then: httpx.Response, times: int = 1):
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) <= times:
            raise exc
        return then

    return handler, calls


@pytest.mark.parametrize("exc", DYING_CONNECTION, ids=IDS)
async def test_the_loader_retries_an_apply_that_a_dying_connection_broke(exc, monkeypatch):
    monkeypatch.setattr("crdscope.loader.apply.BACKOFF_MAX_SECONDS", 0.0)  # no real backoff wait
    created = httpx.Response(201, json={"metadata": {"uid": "u-1"}})
    handler, calls = failing_first(exc, created)
    item = next(document_items(tiny_crd("transport.example.test", "Widget"), "test"))
    applier = Applier(mock_cluster(handler), "run-1", asyncio.Event())
    result = await applier.apply(item, CREATE_ONLY)
    assert (result.outcome, result.uid) == ("created", "u-1")
    assert applier.retries_transport == 1 and len(calls) == 2


@pytest.mark.parametrize("exc", DYING_CONNECTION, ids=IDS)
async def test_a_probe_turns_a_dying_connection_into_an_error_sample(exc):
    handler, _ = failing_first(exc, httpx.Response(200, json={}), times=10)
    cluster = mock_cluster(handler)
    sample = await probe_version(cluster)
    assert sample.error and SERVER in sample.error
    check = await health_check(cluster, "readyz")
    assert check.unreachable and check.ok is False
    count, reason = await count_crds(cluster)
    assert count is None and reason and SERVER in reason


@pytest.mark.parametrize("exc", DYING_CONNECTION, ids=IDS)
async def test_get_json_turns_a_dying_connection_into_one_line(exc):
    cluster = Cluster.__new__(Cluster)  # the request path only: config and client
    handler, _ = failing_first(exc, httpx.Response(200, json={}))
    cluster.config = types.SimpleNamespace(server=SERVER)
    cluster.client = httpx.AsyncClient(base_url=SERVER, transport=httpx.MockTransport(handler))
    with pytest.raises(ClusterError) as raised:
        await cluster.get_json("/version")
    message = str(raised.value)
    assert SERVER in message and "\n" not in message and message == explain(exc, SERVER)
