"""A new user's first contact, as the README tells it (issue 37, item 6).

Each test names the defect it guards against: running crdscope after `make demo`, the top-level
``--context``/``--kubeconfig``, a bad size's exit code, ``lab status`` with no lab, which lab a lab
command means, compressed recordings, and ``doctor`` on a server that never answers.
"""

from __future__ import annotations

import gzip
import json
import lzma
import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
import yaml
from click.testing import CliRunner

from crdscope.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent.parent
RECORDING_XZ = ROOT / "tests" / "data" / "recording-0.1.0-handwritten-encoder.jsonl.xz"


def write_kubeconfig(path: Path, contexts: dict[str, str], current: str) -> Path:
    """A kubeconfig whose contexts (name -> server) each have a cluster of their own and a token."""
    document = {
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "clusters": [{"name": name, "cluster": {"server": server}} for name, server in contexts.items()],
        "users": [{"name": "user", "user": {"token": "not-a-real-token"}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": "user"}} for name in contexts],
    }
    path.write_text(yaml.safe_dump(document))
    return path


def one_line(result) -> str:
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


# --------------------------------------------------------------------------- 1. after `make demo`


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("variables", [[], ["FLEET=1"]])
def test_make_demo_ends_by_saying_how_to_run_crdscope(variables):
    # `make -n` prints the recipe without running it: the last command says where crdscope is.
    # Under `make test` the parent make's MAKEFLAGS (-w) would add "Leaving directory" lines.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    done = subprocess.run(["make", "-n", "--no-print-directory", "demo", *variables], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=True, env=env)
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("echo") and ".venv/bin/crdscope" in last and "source .venv/bin/activate" in last


def test_the_readme_says_where_the_demo_put_crdscope():
    readme = (ROOT / "README.md").read_text()
    quick_start = readme.split("## Commands")[0]
    assert "`.venv/bin/crdscope`" in quick_start and "`source .venv/bin/activate`" in quick_start


# --------------------------------------------------------------------------- 2. `crdscope --context X`


def test_a_bad_context_before_no_command_is_the_one_line_context_error(tmp_path):
    kubeconfig = write_kubeconfig(tmp_path / "config", {"a": "https://127.0.0.1:1"}, "a")
    result = CliRunner().invoke(cli, ["--kubeconfig", str(kubeconfig), "--context", "missing"])
    line = one_line(result)
    assert result.exit_code == 2, result.output
    assert "context 'missing' not found" in line and "No such option" not in line


def test_the_top_level_options_reach_the_monitor(tmp_path, monkeypatch):
    import crdscope.tui.launch as launch

    opened: list[tuple[str, dict]] = []
    monkeypatch.setattr(launch, "open_monitor", lambda **kwargs: opened.append(("one", kwargs)))
    monkeypatch.setattr(launch, "open_fleet_monitor", lambda contexts, **kwargs: opened.append(("fleet", {
        "contexts": contexts, **kwargs})))
    kubeconfig = str(tmp_path / "config")
    assert CliRunner().invoke(cli, ["--kubeconfig", kubeconfig, "--context", "b"]).exit_code == 0
    assert CliRunner().invoke(cli, ["--context", "a", "--context", "b"]).exit_code == 0
    assert opened[0][0] == "one" and opened[0][1]["kubeconfig"] == kubeconfig and opened[0][1]["context"] == "b"
    assert opened[1][0] == "fleet" and tuple(opened[1][1]["contexts"]) == ("a", "b")


def test_top_level_options_before_another_command_are_refused_in_one_line(tmp_path):
    result = CliRunner().invoke(cli, ["--context", "a", "doctor"])
    assert result.exit_code == 2
    assert "after `doctor`" in one_line(result)


# --------------------------------------------------------------------------- 3. a bad size


@pytest.mark.parametrize("command", [
    ["watch", "--headless"], ["doctor"], ["estimate", "synthetic:3", "--kubernetes", "1.37"], ["lab", "up"],
    ["demo"], ["compare", "a", "b"], ["lab", "limit"],
])
@pytest.mark.parametrize("size", ["12Q", "1M"])  # not a quantity; a quantity below what a server needs
def test_a_bad_memory_size_is_a_configuration_error(tmp_path, command, size):
    kubeconfig = ["--kubeconfig", str(tmp_path / "none")] if command[0] in ("watch", "doctor") else []
    argv = [*command, size] if command == ["lab", "limit"] else [*command, "--memory-limit", size]
    result = CliRunner().invoke(cli, [*argv, *kubeconfig])
    line = one_line(result)
    assert result.exit_code == 2, result.output
    assert size in line and ("memory size" in line or "below 64 MiB" in line)


# --------------------------------------------------------------------------- 4. `lab status`, no lab


def test_lab_status_with_no_lab_up_says_so_and_succeeds(tmp_path, monkeypatch):
    monkeypatch.setenv("CRDSCOPE_LAB_HOME", str(tmp_path / "labs"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    result = CliRunner().invoke(cli, ["lab", "status"])
    assert result.exit_code == 0 and "no lab is up" in one_line(result)
    named = CliRunner().invoke(cli, ["lab", "status", "--name", "x"])
    assert named.exit_code == 0 and "no lab named x is up" in one_line(named)
    as_json = CliRunner().invoke(cli, ["lab", "status", "--json"])
    assert as_json.exit_code == 0 and json.loads(as_json.output) == {"up": False, "name": ""}


# --------------------------------------------------------------------------- 5. which lab


def fake_lab(name: str, server: str):
    """A lab's state file as `lab up --name` leaves it (no process behind it)."""
    from crdscope.lab.controlplane import Lab, LabState

    lab = Lab(name=name)
    lab.save(LabState(run_dir="/nonexistent", kubeconfig="/nonexistent/kubeconfig", server=server,
                      kubernetes_version="v1.37.2", binaries_origin="test", name=name,
                      admin_context=f"crdscope-lab-{name}" if name else "crdscope-lab"))
    return lab


def test_a_lab_is_found_by_name_then_default_then_the_current_context(tmp_path, monkeypatch):
    from crdscope.lab.lookup import find_lab

    monkeypatch.setenv("CRDSCOPE_LAB_HOME", str(tmp_path / "labs"))
    contexts = {"crdscope-lab-x": "https://127.0.0.1:40001", "other": "https://127.0.0.1:40009"}
    kubeconfig = write_kubeconfig(tmp_path / "config", contexts, "crdscope-lab-x")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    said: list[str] = []
    assert find_lab(say=said.append).name == "" and not said  # nothing up: the default, said nowhere
    fake_lab("x", "https://127.0.0.1:40001")
    assert find_lab(say=said.append).name == "x"
    assert said == ["lab x: the one serving the current context crdscope-lab-x (https://127.0.0.1:40001)"]
    assert find_lab("y", say=said.append).name == "y"  # an explicit name wins
    write_kubeconfig(kubeconfig, contexts, "other")
    assert find_lab().name == ""  # the current context is no lab's
    fake_lab("", "https://127.0.0.1:40002")
    write_kubeconfig(kubeconfig, contexts, "crdscope-lab-x")
    assert find_lab().name == ""  # the default lab, up, comes before the context's


# --------------------------------------------------------------------------- 6. compressed recordings


@pytest.fixture
def compressed_recordings(tmp_path) -> list[Path]:
    plain = lzma.decompress(RECORDING_XZ.read_bytes())
    gz = tmp_path / "recording.jsonl.gz"
    gz.write_bytes(gzip.compress(plain))
    return [RECORDING_XZ, gz]


def test_compressed_recordings_read_as_the_plain_one(tmp_path, compressed_recordings):
    from crdscope.session.replay import read_recording

    plain = tmp_path / "recording.jsonl"
    plain.write_bytes(lzma.decompress(RECORDING_XZ.read_bytes()))
    expected = read_recording(plain)
    assert expected.samples and expected.damage is None
    for path in compressed_recordings:
        got = read_recording(path)
        assert got.damage is None and got.ended == expected.ended
        assert [s.to_json() for s in got.samples] == [s.to_json() for s in expected.samples]
        assert got.events == expected.events


def test_replay_and_report_take_compressed_recordings(compressed_recordings):
    for path in compressed_recordings:
        replayed = CliRunner().invoke(cli, ["replay", "--headless", str(path)])
        assert replayed.exit_code == 0, replayed.output
        assert "replayed" in replayed.output.strip().splitlines()[-1]
        reported = CliRunner().invoke(cli, ["report", str(path)])
        assert reported.exit_code == 0, reported.output
        assert "crdscope session report" in reported.output


def test_a_compressed_recording_cut_short_replays_what_came_before(tmp_path):
    from crdscope.session.replay import read_recording

    data = RECORDING_XZ.read_bytes()
    cut = tmp_path / "cut.jsonl.xz"
    cut.write_bytes(data[: len(data) * 2 // 3])
    recording = read_recording(cut)
    assert recording.damage is not None and "compressed data damaged" in recording.damage.reason
    assert 0 < len(recording.samples) < len(read_recording(RECORDING_XZ).samples)


# --------------------------------------------------------------------------- 7. a server that never answers


async def test_refused_connections_are_not_counted_as_load():
    from crdscope.connection.cluster import GoawayRetryTransport

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/version":
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(200, json={})

    mock = httpx.MockTransport(handler)
    transport = GoawayRetryTransport(mock, mock)
    async with httpx.AsyncClient(transport=transport, base_url="https://127.0.0.1:1") as client:
        for _ in range(3):
            with pytest.raises(httpx.ConnectError):
                await client.get("/version")
        assert (await client.get("/apis")).status_code == 200
    traffic = transport.traffic
    assert traffic.total().requests == 1 and traffic.unsent == 3 and traffic.answered == 1
    assert [path for _, path in traffic.by_origin_and_path()] == ["GET /apis"]


async def test_a_request_the_server_received_counts_even_unanswered():
    import asyncio
    import socket

    from crdscope.connection.cluster import GoawayRetryTransport

    received = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")  # the request's headers arrived: never answer them
        received.set()
        await reader.read()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    listening = server.sockets[0].getsockname()[1]
    with socket.socket() as held:  # bound, never listening: connections to it are refused
        held.bind(("127.0.0.1", 0))
        closed = held.getsockname()[1]
        transport = GoawayRetryTransport(httpx.AsyncHTTPTransport(), httpx.AsyncHTTPTransport())
        async with server, httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(5, read=0.5)) as client:
            with pytest.raises(httpx.ReadTimeout):
                await client.get(f"http://127.0.0.1:{listening}/version")
            assert received.is_set()
            with pytest.raises(httpx.ConnectError):
                await client.get(f"http://127.0.0.1:{closed}/version")
    traffic = transport.traffic
    assert traffic.total().requests == 1 and traffic.unsent == 1 and traffic.answered == 0


def test_doctor_on_a_closed_port_says_the_server_did_not_answer(tmp_path):
    import socket

    with socket.socket() as held:  # a loopback port nobody listens on: bound, never listening
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        kubeconfig = write_kubeconfig(tmp_path / "config", {"closed": f"https://127.0.0.1:{port}"}, "closed")
        result = CliRunner().invoke(cli, ["doctor", "--kubeconfig", str(kubeconfig), "--duration", "2s", "--json"])
    assert result.exit_code == 3, result.output
    report = json.loads(result.stdout)
    assert report["answered"] is False and report["exit_code"] == 3
    assert report["own_load"]["requests"] == 0 and report["own_load"]["unsent"] > 0
    assert not any("longer --duration" in line for line in report["not_checked"])


def test_a_reader_that_goes_away_ends_the_command_quietly():
    """`crdscope lab versions | head -1`: the pipe closes under a command still writing; no
    "internal error", no traceback, the shell's exit code for SIGPIPE."""
    import subprocess
    import sys

    writer = ("import click, sys; from crdscope.cli.main import Group\n"
              "@click.group(cls=Group)\ndef cli(): pass\n"
              "@cli.command()\ndef spill():\n    for n in range(200000): click.echo(f'line {n}')\n"
              "cli(['spill'], prog_name='crdscope')\n")
    child = subprocess.Popen([sys.executable, "-c", writer], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # before it writes: every write meets a closed pipe
    stderr = child.stderr.read().decode()
    assert child.wait(timeout=60) == 141
    assert stderr == "", stderr
