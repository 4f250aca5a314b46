"""The HTTP/2 PING client against a tiny HTTP/2 server written here (h2 over asyncio, TLS with ALPN).

The server answers PINGs as Go's does (h2 acks them in ``receive_data``), and can freeze as a
SIGSTOPped process does: connections are still accepted (the kernel's backlog), but no TLS
handshake and no frame is answered until it thaws.  Each test waits on conditions with deadlines.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from pathlib import Path

import h2.config
import h2.connection
import h2.events

from crdscope.lab.pki import CertificateAuthority
from crdscope.connection import h2ping
from crdscope.connection.cluster import InFlightRequests
from crdscope.connection.h2ping import H2Pinger, unsupported_reason
from crdscope.connection.kubeconfig import ClusterConfig
from crdscope.probes.responsiveness import ResponsivenessProbe
from crdscope.base.samples.responsiveness import ResponsivenessSample
from tests.helpers import async_wait_for

#: Short figures so that each behaviour shows within a second or two.
FAST = {"interval": 0.1, "stall_seconds": 0.3, "fresh_timeout": 0.3, "connect_timeout": 2.0,
        "retry_delay": 0.05, "max_retry_delay": 0.2}


class _ServerConnection(asyncio.Protocol):
    """One connection of :class:`PingServer`: TCP first, TLS once the server is not frozen."""

    def __init__(self, server: PingServer) -> None:
        self.server = server
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        self.transport: asyncio.Transport | None = None
        self.pending: list[bytes] = []
        #: Cleared: this connection alone is frozen (a dropped NAT entry, one frozen replica).
        self.answering = True
        self.handshake: asyncio.Task | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Nothing is read before the TLS handshake starts (a frozen process reads nothing).
        transport.pause_reading()
        self.tcp = transport
        self.server.accepted += 1
        self.server.connections.append(self)
        if self.server.thawed:
            self.start_tls()

    def start_tls(self) -> None:
        if self.handshake is None:
            self.handshake = asyncio.ensure_future(self._tls())

    async def _tls(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            self.transport = await loop.start_tls(self.tcp, self, self.server.context, server_side=True)
        except (ConnectionError, ssl.SSLError, OSError):
            self.tcp.abort()
            return
        self.h2.initiate_connection()
        self.transport.write(self.h2.data_to_send())

    def data_received(self, data: bytes) -> None:
        self.pending.append(data)
        self.process()

    def process(self) -> None:
        """Answer what arrived, unless frozen (then it waits, as in a stopped process's socket)."""
        if not (self.server.thawed and self.answering) or self.transport is None:
            return
        data, self.pending = b"".join(self.pending), []
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.transport.abort()
            return
        self.server.pings += sum(1 for event in events if isinstance(event, h2.events.PingReceived))
        self.transport.write(self.h2.data_to_send())  # h2 queued the PING ACK and the SETTINGS ACK

    def connection_lost(self, exc: Exception | None) -> None:
        if self in self.server.connections:
            self.server.connections.remove(self)

    def goaway(self) -> None:
        """What Go's server does to an idle connection: GOAWAY, then close."""
        if self.transport is not None:
            self.h2.close_connection()
            self.transport.write(self.h2.data_to_send())
            self.transport.close()

    def close(self) -> None:
        (self.transport or self.tcp).abort()
        if self.handshake is not None:
            self.handshake.cancel()


class PingServer:
    """An HTTP/2 server over TLS that only answers PINGs (and SETTINGS), and can freeze."""

    def __init__(self, directory: Path, *, alpn: tuple[str, ...] = ("h2",)) -> None:
        ca = CertificateAuthority("h2ping-test")
        self.ca_file = directory / "ca.crt"
        self.ca_file.write_bytes(ca.pair().cert_pem)
        cert, key = ca.serving(["127.0.0.1"]).write(directory, "server")
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(str(cert), str(key))
        self.context.set_alpn_protocols(list(alpn))
        self.thawed = True
        self.accepted = 0
        self.pings = 0
        self.connections: list[_ServerConnection] = []
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self, port: int = 0) -> PingServer:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: _ServerConnection(self), "127.0.0.1", port)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    def config(self, ca_file: Path | None = None) -> ClusterConfig:
        return ClusterConfig(server=f"https://127.0.0.1:{self.port}", context="test", user="test", kubeconfig=(),
                             ca_file=str(ca_file or self.ca_file))

    def established(self) -> list[_ServerConnection]:
        return [c for c in self.connections if c.transport is not None]

    def freeze(self) -> None:
        """As SIGSTOP: connections still accepted by the kernel, no handshake, nothing answered."""
        self.thawed = False

    def thaw(self) -> None:
        self.thawed = True
        for connection in list(self.connections):
            connection.start_tls()
            connection.process()

    def goaway_all(self) -> None:
        for connection in self.established():
            connection.goaway()

    async def close(self) -> None:
        for connection in list(self.connections):
            connection.close()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


@contextlib.asynccontextmanager
async def serving(directory: Path, **options: tuple[str, ...]):
    """A :class:`PingServer` running in the test's own event loop."""
    running = await PingServer(directory, **options).start()
    try:
        yield running
    finally:
        await running.close()


@contextlib.asynccontextmanager
async def pinging(config: ClusterConfig, **options: float):
    pinger = H2Pinger(config, **{**FAST, **options})
    pinger.start()
    try:
        yield pinger
    finally:
        await pinger.aclose()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_answers_are_measured_and_nothing_waits(tmp_path):
    async with serving(tmp_path) as server:
        async with pinging(server.config()) as pinger:
            status = await async_wait_for(lambda: (s := pinger.status()).answers >= 5 and s, timeout=10,
                                          message="five PINGs answered")
            assert status.state in (h2ping.ANSWERING, h2ping.WAITING) and status.connections == 1
            assert status.rtt_seconds is not None and 0 < status.rtt_seconds < 1.0
            assert server.pings >= 5 and server.accepted == 1
            # Between two PINGs nothing waits; a PING in flight waits for a few milliseconds at most.
            assert status.waiting_seconds is not None and status.waiting_seconds < FAST["stall_seconds"]
            assert pinger.active
        assert pinger.status().state == h2ping.CLOSED
        await async_wait_for(lambda: not server.connections, timeout=10, message="the connection closed")


async def test_a_frozen_server_makes_the_wait_grow_from_the_first_unanswered_ping_and_thawing_ends_it(tmp_path):
    async with serving(tmp_path) as server, pinging(server.config()) as pinger:
        await async_wait_for(lambda: pinger.status().answers >= 2, timeout=10, message="answers before the freeze")
        server.freeze()
        first = await async_wait_for(lambda: (s := pinger.status()).waiting_seconds > 0.5 and s, timeout=10,
                                     message="a PING waiting")
        # Fresh connections are tried beside the stalled one (is it this connection?): they wait too.
        later = await async_wait_for(
            lambda: (s := pinger.status()).waiting_seconds > first.waiting_seconds + 0.5 and server.accepted >= 2 and s,
            timeout=10, message="the wait growing while fresh connections are tried")
        assert later.waiting_since == first.waiting_since  # one wait, from the first unanswered PING
        assert later.state == h2ping.WAITING
        answers = later.answers
        server.thaw()
        after = await async_wait_for(lambda: (s := pinger.status()).answers > answers and s.waiting_seconds == 0.0 and s,
                                     timeout=10, message="answered again after the thaw")
        assert after.waiting_since is None and after.state == h2ping.ANSWERING


async def test_a_connection_stalled_alone_is_replaced_by_a_fresh_one_that_answers(tmp_path):
    async with serving(tmp_path) as server, pinging(server.config()) as pinger:
        await async_wait_for(lambda: pinger.status().answers >= 2 and server.established(), timeout=10,
                             message="connected and answered")
        (stalled,) = server.established()
        stalled.answering = False  # as a dropped NAT entry or a frozen replica behind a balancer
        try:
            await async_wait_for(lambda: pinger.status().connections >= 2, timeout=10, message="a fresh connection")
            status = await async_wait_for(lambda: (s := pinger.status()).waiting_seconds == 0.0 and s, timeout=10,
                                          message="the fresh connection answering")
            assert status.state == h2ping.ANSWERING
            answers = status.answers
            await async_wait_for(lambda: pinger.status().answers > answers + 2, timeout=10,
                                 message="PINGs answered on the fresh connection")
            assert pinger.status().connections == 2  # replaced once, then kept
        finally:
            stalled.answering = True


async def test_a_goaway_and_close_is_a_reconnect_not_a_failure(tmp_path):
    async with serving(tmp_path) as server, pinging(server.config()) as pinger:
        await async_wait_for(lambda: pinger.status().answers >= 2, timeout=10, message="answers")
        server.goaway_all()
        status = await async_wait_for(lambda: (s := pinger.status()).connections >= 2 and s.answers >= 4 and s,
                                      timeout=10, message="reconnected and answered")
        assert server.accepted == 2 and status.failure is None
        assert status.state in (h2ping.ANSWERING, h2ping.WAITING)


async def test_refused_connections_are_a_state_retried_with_back_off_until_the_server_listens(tmp_path):
    server = PingServer(tmp_path)
    server.port = free_port()  # nothing listens there yet
    config = server.config()
    # The back-off doubles from retry_delay up to max_retry_delay.
    pinger = H2Pinger(config, **FAST)
    delays = []
    for failures in range(1, 6):
        pinger._failed_attempts = failures
        delays.append(pinger._retry_delay())
    assert delays == [0.05, 0.1, 0.2, 0.2, 0.2]
    async with pinging(config) as pinger:
        status = await async_wait_for(lambda: (s := pinger.status()).state == h2ping.REFUSED and s, timeout=10,
                                      message="refused")
        assert status.failure == "connection refused" and pinger.active
        # Refusals count as waiting: the server has not answered since the first attempt.
        waiting = await async_wait_for(lambda: (s := pinger.status()).waiting_seconds > 0.3 and s, timeout=10,
                                       message="the wait growing while refused")
        assert waiting.waiting_since == status.waiting_since and waiting.state == h2ping.REFUSED
        await server.start(server.port)
        try:
            after = await async_wait_for(lambda: (s := pinger.status()).answers >= 1 and s, timeout=10,
                                         message="answered once the server listens")
            assert after.state in (h2ping.ANSWERING, h2ping.WAITING) and after.failure is None
            assert after.waiting_seconds < 0.3
        finally:
            await server.close()


async def test_a_server_without_h2_by_alpn_is_unsupported(tmp_path):
    async with serving(tmp_path, alpn=("http/1.1",)) as server, pinging(server.config()) as pinger:
        status = await async_wait_for(lambda: (s := pinger.status()).state == h2ping.UNSUPPORTED and s,
                                      timeout=10, message="unsupported")
        assert "ALPN" in status.failure and status.waiting_seconds is None and not pinger.active


async def test_a_certificate_the_kubeconfig_does_not_trust_is_unsupported(tmp_path):
    async with serving(tmp_path) as server:
        other = tmp_path / "other-ca.crt"
        other.write_bytes(CertificateAuthority("another").pair().cert_pem)
        async with pinging(server.config(ca_file=other)) as pinger:
            status = await async_wait_for(lambda: (s := pinger.status()).state == h2ping.UNSUPPORTED and s,
                                          timeout=10, message="unsupported")
            assert status.failure.startswith("TLS verification failed")


def test_plain_http_and_proxies_are_unsupported_without_a_connection():
    plain = ClusterConfig(server="http://127.0.0.1:8001", context="c", user="u", kubeconfig=())
    secure = ClusterConfig(server="https://127.0.0.1:6443", context="c", user="u", kubeconfig=())
    assert "plain http" in unsupported_reason(plain, None)
    assert "proxy" in unsupported_reason(secure, "http://proxy:3128")
    assert unsupported_reason(secure, None) is None
    pinger = H2Pinger(secure, proxy="http://proxy:3128")
    pinger.start()  # no loop needed: nothing starts
    assert pinger.status().state == h2ping.UNSUPPORTED and not pinger.active
    assert H2Pinger(secure, interval=0).status().state == h2ping.OFF


class _Answer:
    async def aclose(self) -> None:
        return None


class _Client:
    def __init__(self) -> None:
        self.gets: list[str] = []

    async def get(self, path: str, **_: object) -> _Answer:
        self.gets.append(path)
        return _Answer()


class _Cluster:
    """What the responsiveness probe reads of a cluster."""

    def __init__(self, config: ClusterConfig) -> None:
        self.config = config
        self.server = config.server
        self.in_flight = InFlightRequests()
        self.client = _Client()


async def test_the_probe_reports_the_ping_and_sends_no_heartbeat_while_pings_are_answered(tmp_path):
    async with serving(tmp_path) as server:
        cluster = _Cluster(server.config())
        probe = ResponsivenessProbe(cluster, heartbeat_seconds=0.0, ping=H2Pinger(cluster.config, **FAST))
        try:
            sample = await async_wait_for(probe.run, timeout=10, message="a sample")
            sample = await async_wait_for(lambda: _answered(probe), timeout=10, message="a sample with a PING answered")
            assert sample.ping_state in ("answering", "waiting") and sample.ping_waiting_seconds is not None
            assert sample.heartbeats == 0 and cluster.client.gets == []  # silence for ever: no /livez
            assert ResponsivenessSample.from_json(sample.to_json()) == sample
        finally:
            await probe.aclose()
        assert probe.ping.status().state == h2ping.CLOSED


async def test_a_request_failure_older_than_the_latest_ping_answer_is_no_outage(tmp_path):
    async with serving(tmp_path) as server:
        cluster = _Cluster(server.config())
        probe = ResponsivenessProbe(cluster, ping=H2Pinger(cluster.config, **FAST))
        try:
            answered = await async_wait_for(lambda: _answered(probe), timeout=10, message="a PING answered")
            # A request fails in transport (a connect timeout during a freeze, say) ...
            cluster.in_flight.end(cluster.in_flight.begin("GET", "/readyz"), failure="ConnectTimeout")
            failing = await probe.run()
            assert failing.last_failure == "ConnectTimeout"
            # ... then the server answers a PING: with no heartbeat, no request may come for a minute to
            # clear the failure, and its growing age must not read as an outage.
            answers = probe.ping.status().answers
            await async_wait_for(lambda: probe.ping.status().answers > answers, timeout=10, message="an answer")
            later = await probe.run()
            assert later.unanswered_seconds == 0.0 and later.last_failure is None
            assert answered.heartbeats == later.heartbeats == 0
        finally:
            await probe.aclose()


async def _answered(probe: ResponsivenessProbe) -> ResponsivenessSample | None:
    sample = await probe.run()
    return sample if sample.ping_rtt_seconds is not None else None


async def test_the_probe_falls_back_to_heartbeats_where_pings_are_unsupported(tmp_path):
    async with serving(tmp_path, alpn=("http/1.1",)) as server:
        cluster = _Cluster(server.config())
        probe = ResponsivenessProbe(cluster, heartbeat_seconds=0.0, ping=H2Pinger(cluster.config, **FAST))
        try:
            await probe.run()
            await async_wait_for(lambda: not probe.ping.active, timeout=10, message="unsupported")
            sample = await async_wait_for(lambda: _heartbeat_sent(probe, cluster), timeout=10, message="a heartbeat")
            assert sample.ping_state == "unsupported" and sample.ping_waiting_seconds is None
            assert "ALPN" in sample.ping_failure
        finally:
            await probe.aclose()


async def test_the_monitor_closes_the_ping_connection_and_task_when_it_stops(tmp_path):
    from crdscope.connection.cluster import Cluster
    from crdscope.probes.monitor import Monitor
    from crdscope.base.settings import Settings

    async with serving(tmp_path) as server:
        cluster = Cluster(server.config())
        monitor = Monitor(cluster, Settings().override("cadences", responsiveness=0.1, responsiveness_ping=0.1),
                          probes=["responsiveness"], latest={})
        samples: list[ResponsivenessSample] = []
        monitor.add_sink(samples.append)
        running = asyncio.create_task(monitor.run())
        try:
            await async_wait_for(lambda: any(s.ping_rtt_seconds is not None for s in samples), timeout=10,
                                 message="a PING answered")
        finally:
            running.cancel()
            with contextlib.suppress(BaseException):
                await running
            await cluster.aclose()
        probe = monitor.probe("responsiveness")
        assert probe.ping.status().state == h2ping.CLOSED
        assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("h2ping")]
        await async_wait_for(lambda: not server.connections, timeout=10, message="the PING connection closed")


async def _heartbeat_sent(probe: ResponsivenessProbe, cluster: _Cluster) -> ResponsivenessSample | None:
    sample = await probe.run()
    return sample if cluster.client.gets == ["/livez"] else None


def test_recorded_samples_without_ping_fields_replay_with_defaults():
    recorded = {"timestamp": 10.0, "error": None, "server": "https://x", "in_flight": 0,
                "oldest_request_seconds": 0.0, "oldest_request": "", "unanswered_seconds": 0.0,
                "since_answer_seconds": 1.0, "last_failure": None, "heartbeats": 3}
    sample = ResponsivenessSample.from_json(recorded)
    assert (sample.ping_state, sample.ping_waiting_seconds, sample.ping_rtt_seconds, sample.ping_failure) == \
        ("", None, None, None)
