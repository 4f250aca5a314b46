"""The README's exit codes where no cluster is needed (issue 46, item 3): a headless watch whose cluster
never answered exits 3 in one line, as ``doctor`` does; a refused ``load`` prints only its error; a
``probe`` whose sample failed exits 3; a reader that goes away is 141.

The clusters here are loopback ports: one bound and never listening (every connection refused), one
that accepts and never answers, one that starts listening late.  The e2e side (a lab started late, a
fleet with one good context, a cluster lost mid-watch) is in ``tests/e2e/test_session.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from crdscope.cli.main import cli
from tests.unit.test_first_contact import write_kubeconfig

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def closed_port() -> Iterator[int]:
    """A loopback port bound and never listening: every connection to it is refused."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


def stderr_line(result) -> str:
    """The one line a refused command prints (``crdscope: ...``), no traceback."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


# --------------------------------------------------------------------------- watch --headless


def test_a_headless_watch_whose_cluster_never_answers_exits_3_in_one_line(tmp_path):
    with closed_port() as port:
        kubeconfig = write_kubeconfig(tmp_path / "config", {"closed": f"https://127.0.0.1:{port}"}, "closed")
        started = time.monotonic()
        result = CliRunner().invoke(cli, ["watch", "--headless", "--kubeconfig", str(kubeconfig),
                                          "--wait-for-cluster", "1s"])
        took = time.monotonic() - started
    assert result.exit_code == 3, result.output
    assert stderr_line(result) == (f"crdscope: the API server at https://127.0.0.1:{port} did not answer in 1.0 s "
                                   "(connection refused): it is down, stopped or not at that address; nothing was "
                                   "watched (--wait-for-cluster DURATION waits longer)")
    # --wait-for-cluster given: the wait is said as it begins, and nothing was watched.
    assert result.stdout == f"waiting up to 1.0 s for the API server at https://127.0.0.1:{port} (connection refused)\n"
    assert 1.0 <= took < 10, took


def test_a_fleet_watch_exits_3_only_when_no_context_answered(tmp_path):
    with closed_port() as first, closed_port() as second:
        kubeconfig = write_kubeconfig(tmp_path / "config", {"a": f"https://127.0.0.1:{first}",
                                                            "b": f"https://127.0.0.1:{second}"}, "a")
        result = CliRunner().invoke(cli, ["watch", "--headless", "--kubeconfig", str(kubeconfig), "--context", "a",
                                          "--context", "b", "--wait-for-cluster", "1s"])
    assert result.exit_code == 3, result.output
    assert stderr_line(result) == (f"crdscope: no context answered in 1.0 s: context a at https://127.0.0.1:{first} "
                                   f"(connection refused); context b at https://127.0.0.1:{second} (connection "
                                   "refused); nothing was watched (--wait-for-cluster DURATION waits longer)")


@pytest.mark.parametrize(("args", "says"), [
    (["--wait-for-cluster", "30s"], "--wait-for-cluster goes with --headless"),
    (["--headless", "--wait-for-cluster", "soon"], "--wait-for-cluster 'soon' is not a duration"),
    (["--headless", "--wait-for-cluster", "0s"], "--wait-for-cluster '0s' must be positive"),
])
def test_a_bad_wait_for_cluster_is_a_configuration_error(tmp_path, args, says):
    kubeconfig = write_kubeconfig(tmp_path / "config", {"lab": "https://127.0.0.1:1"}, "lab")
    result = CliRunner().invoke(cli, ["watch", "--kubeconfig", str(kubeconfig), *args])
    assert result.exit_code == 2 and says in result.output, result.output


async def test_first_answer_asks_a_refusing_server_again_until_it_listens():
    """Refused: asked again every ``every`` seconds; the first answer ends the wait."""
    from crdscope.connection.cluster import Cluster, first_answer
    from crdscope.connection.kubeconfig import ClusterConfig

    accepted: list[float] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(time.monotonic())
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}")
        await writer.drain()
        writer.close()

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        cluster = Cluster(ClusterConfig(server=f"http://127.0.0.1:{port}", context="late", user="", kubeconfig=()))
        told: list[str] = []
        asking = asyncio.create_task(first_answer(cluster, 20.0, every=0.2, waiting=told.append))
        started = time.monotonic()
        await asyncio.sleep(0.5)  # deliberate: the time that passes is what is tested (refused requests meanwhile)
        held.listen()
        server = await asyncio.start_server(answer, sock=held)
        try:
            assert await asyncio.wait_for(asking, 10) is None
        finally:
            server.close()
            await cluster.aclose()
    assert told == [f"cannot reach http://127.0.0.1:{port}: connection refused"]  # said once, not per retry
    assert len(accepted) == 1 and accepted[0] - started >= 0.5
    refused = cluster.traffic.unsent
    assert 2 <= refused <= 5, f"{refused} refused requests in 0.5 s at one per 0.2 s"


async def test_first_answer_keeps_one_request_in_flight_to_a_server_that_never_answers():
    """A server that accepts and says nothing (stopped, saturated) is not asked again and again."""
    from crdscope.connection.cluster import Cluster, first_answer
    from crdscope.connection.kubeconfig import ClusterConfig

    accepted: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        await reader.read()  # until the client gives up

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    cluster = Cluster(ClusterConfig(server=f"http://127.0.0.1:{port}", context="silent", user="", kubeconfig=()))
    started = time.monotonic()
    try:
        why = await first_answer(cluster, 1.5, every=0.1)
    finally:
        server.close()
        await cluster.aclose()
    assert why is not None and "did not answer in time" in why, why
    assert len(accepted) == 1 and 1.5 <= time.monotonic() - started < 5


# --------------------------------------------------------------------------- load, probe


@pytest.mark.parametrize("as_json", [False, True])
def test_a_refused_load_prints_only_its_one_line_error(tmp_path, as_json):
    """No summary with an empty run id: the run never began."""
    with closed_port() as port:
        kubeconfig = write_kubeconfig(tmp_path / "config", {"prod": f"https://127.0.0.1:{port}"}, "prod")
        result = CliRunner().invoke(cli, ["load", "synthetic:3", "--kubeconfig", str(kubeconfig), "--context", "prod",
                                          *(["--json"] if as_json else [])])
    assert result.exit_code == 3, result.output
    assert result.stdout == "", result.stdout
    where, error = result.stderr.strip().splitlines()  # where it would write, said first; then why it did not
    assert where == f"loading synthetic:3 into context prod at https://127.0.0.1:{port}"
    assert error == f"crdscope: cannot reach https://127.0.0.1:{port}: connection refused"


def test_a_probe_whose_sample_failed_exits_3(tmp_path):
    with closed_port() as port:
        kubeconfig = write_kubeconfig(tmp_path / "config", {"closed": f"https://127.0.0.1:{port}"}, "closed")
        result = CliRunner().invoke(cli, ["probe", "version", "--json", "--kubeconfig", str(kubeconfig)])
    assert result.exit_code == 3, result.output
    assert stderr_line(result) == f"crdscope: probe version: cannot reach https://127.0.0.1:{port}: connection refused"


def test_a_reader_that_goes_away_is_exit_141():
    """`crdscope rules | head -1`, with the reader gone before the first line: the shell's code for SIGPIPE."""
    child = subprocess.Popen([sys.executable, "-m", "crdscope.cli.main", "rules"], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()
    stderr = child.stderr.read().decode()
    assert child.wait(timeout=60) == 141
    assert stderr == "", stderr


def test_mrap_exits_2_on_a_composed_kind_that_no_mrd_has(tmp_path):
    """README (mrap): exit 2 when a composed kind is inactive (tests/unit/test_activation.py) or has no MRD."""
    from crdscope.loader.synthetic import synthetic_documents
    from tests.unit.test_activation import composition, pt

    documents = list(synthetic_documents(60))
    (tmp_path / "crds.yaml").write_text(yaml.safe_dump_all(documents))
    storage = next(d for d in documents if d["spec"]["group"] == "storage.m.synthetic.crdscope.dev")
    api = f"{storage['spec']['group']}/{storage['spec']['versions'][0]['name']}"
    (tmp_path / "platform.yaml").write_text(yaml.safe_dump(composition(pt((api, "NoSuchKind")))))
    done = subprocess.run([sys.executable, "-m", "crdscope.cli.main", "mrap", "--from", str(tmp_path), "--json"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    verdicts = {(v["severity"], v["code"]) for v in json.loads(done.stdout)["verdicts"]}
    assert ("critical", "composed-no-mrd") in verdicts and ("critical", "composed-inactive") not in verdicts
