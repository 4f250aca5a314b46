"""A GOAWAY that cuts off an error answer's body is retried over HTTP/1.1 (the lab's 401s).

On the lab 1 unauthenticated request in 40 got its 401's headers and then lost the body to the
connection's GOAWAY: the caller saw "closed the connection (ConnectionTerminated ...)" instead of
the 401 (tests/e2e/test_lab.py::test_unknown_client_certificate_is_401 failed once in CI).
"""

from __future__ import annotations

import httpx

from crdscope.connection.cluster import GoawayRetryTransport

UNAUTHORIZED = b'{"kind":"Status","code":401,"message":"Unauthorized"}'


class CutOff(httpx.AsyncByteStream):
    """A body that ends in the connection's GOAWAY, as httpcore reports it."""

    async def __aiter__(self):
        raise httpx.RemoteProtocolError("<ConnectionTerminated error_code:0, last_stream_id:1, additional_data:None>")
        yield b""  # an async generator


def primary(request: httpx.Request) -> httpx.Response:
    return httpx.Response(401, stream=CutOff())


def fallback(request: httpx.Request) -> httpx.Response:
    return httpx.Response(401, content=UNAUTHORIZED)


async def test_a_cut_off_error_body_is_sent_again_over_http11():
    transport = GoawayRetryTransport(httpx.MockTransport(primary), httpx.MockTransport(fallback))
    async with httpx.AsyncClient(transport=transport, base_url="https://apiserver.test") as client:
        response = await client.get("/apis")
    assert response.status_code == 401 and response.content == UNAUTHORIZED
    assert transport.retries == 1


async def test_a_good_answer_is_streamed_not_read_by_the_transport():
    chunks = []

    class Counted(httpx.AsyncByteStream):
        async def __aiter__(self):
            for chunk in (b"a" * 10, b"b" * 10):
                chunks.append(chunk)
                yield chunk

    def ok(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=Counted())

    transport = GoawayRetryTransport(httpx.MockTransport(ok), httpx.MockTransport(fallback))
    async with httpx.AsyncClient(transport=transport, base_url="https://apiserver.test") as client, \
            client.stream("GET", "/openapi/v2") as response:
        assert chunks == []  # nothing read before the caller reads
        assert await response.aread() == b"a" * 10 + b"b" * 10
    assert transport.retries == 0
