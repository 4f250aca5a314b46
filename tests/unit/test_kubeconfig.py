"""kubeconfig resolution: every case kubectl handles, without a cluster.

Requests go to httpx.MockTransport only to see which credentials would be
sent; cluster behaviour itself is tested against the lab in tests/e2e.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import stat
import sys
import textwrap
from pathlib import Path

import httpx
import pytest
import yaml

from crdscope.lab.pki import CertificateAuthority
from crdscope.connection.cluster import Cluster, KubeAuth, load_config, load_in_cluster_config
from crdscope.base.errors import ConfigError

SERVER = "https://k8s.example.test:6443"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority("test-ca")


def write_config(path: Path, users: dict[str, dict], *, current: str | None = None,
                 cluster: dict | None = None, extra_contexts: dict[str, str] | None = None) -> Path:
    cluster = cluster or {"server": SERVER}
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": name, "user": user} for name, user in users.items()],
        "contexts": [{"name": name, "context": {"cluster": "c", "user": name}} for name in users],
    }
    for name, user in (extra_contexts or {}).items():
        document["contexts"].append({"name": name, "context": {"cluster": "c", "user": user}})
    if current:
        document["current-context"] = current
    path.write_text(yaml.safe_dump(document))
    return path


async def sent_headers(config) -> httpx.Headers:
    """The headers a request would carry with this config's credentials."""
    seen = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["headers"] = request.headers
        return httpx.Response(200, json={})

    auth = KubeAuth(config.credentials) if config.credentials else None
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler), auth=auth) as client:
        await client.get(f"{SERVER}/version")
    return seen["headers"]


def test_client_certificate_and_ca_data(tmp_path: Path, ca: CertificateAuthority):
    pair = ca.client("alice", ["devs"])
    path = write_config(
        tmp_path / "config",
        {"alice": {"client-certificate-data": b64(pair.cert_pem), "client-key-data": b64(pair.key_pem)}},
        current="alice",
        cluster={"server": SERVER, "certificate-authority-data": b64(ca.pair().cert_pem)},
    )
    config = load_config(str(path))
    assert config.server == SERVER
    assert config.context == "alice" and config.user == "alice"
    assert Path(config.cert_file).read_bytes() == pair.cert_pem
    assert Path(config.key_file).read_bytes() == pair.key_pem
    assert Path(config.ca_file).read_bytes() == ca.pair().cert_pem
    assert config.credentials is None
    assert not config.insecure_skip_tls_verify
    # The TLS context loads both: a wrong key would raise here.
    Cluster(config)


async def test_bearer_token(tmp_path: Path):
    path = write_config(tmp_path / "config", {"bob": {"token": "s3cret-token"}}, current="bob")
    config = load_config(str(path))
    assert (await sent_headers(config))["authorization"] == "Bearer s3cret-token"
    assert "s3cret" not in repr(config)


async def test_token_file_is_reread(tmp_path: Path):
    token_file = tmp_path / "token"
    token_file.write_text("first\n")
    path = write_config(tmp_path / "config", {"sa": {"tokenFile": "token"}}, current="sa")
    config = load_config(str(path))  # relative to the kubeconfig's directory
    assert (await sent_headers(config))["authorization"] == "Bearer first"
    token_file.write_text("second")
    config.credentials._reread = 0  # the minute client-go waits, shortened
    assert (await sent_headers(config))["authorization"] == "Bearer second"


def _plugin(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "plugin.py"
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def _exec_user(script: Path, timeout_env: dict | None = None) -> dict:
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": str(script),
            "args": ["--flag"],
            "env": [{"name": "PLUGIN_STATE", "value": str(script.parent / "calls")}],
            "interactiveMode": "Never",
        }
    }


async def test_exec_plugin_token_refreshed_before_expiry(tmp_path: Path):
    script = _plugin(tmp_path, """
        import json, os, sys, datetime
        state = os.environ["PLUGIN_STATE"]
        calls = int(open(state).read()) + 1 if os.path.exists(state) else 1
        open(state, "w").write(str(calls))
        info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
        assert sys.argv[1:] == ["--flag"] and info["kind"] == "ExecCredential"
        # The first token expires within the refresh margin; the second lasts an hour.
        ttl = 30 if calls == 1 else 3600
        expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=ttl)
        print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                          "status": {"token": f"token-{calls}",
                                     "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")}}))
    """)
    path = write_config(tmp_path / "config", {"ex": _exec_user(script)}, current="ex")
    config = load_config(str(path))
    # Loading ran the plugin once (token-1, about to expire): the first request renews it.
    assert (await sent_headers(config))["authorization"] == "Bearer token-2"
    assert (await sent_headers(config))["authorization"] == "Bearer token-2"  # cached, valid for an hour
    assert (tmp_path / "calls").read_text() == "2"


def test_exec_plugin_failure_is_one_line(tmp_path: Path):
    script = _plugin(tmp_path, """
        import sys
        print("Traceback: noise", file=sys.stderr)
        print("error: you must log in first", file=sys.stderr)
        sys.exit(3)
    """)
    path = write_config(tmp_path / "config", {"ex": _exec_user(script)}, current="ex")
    with pytest.raises(ConfigError) as caught:
        load_config(str(path))
    assert "exit 3" in str(caught.value) and "you must log in first" in str(caught.value)
    assert "\n" not in str(caught.value)
    assert caught.value.exit_code == 2


def test_exec_plugin_that_hangs_is_cut_off(tmp_path: Path, monkeypatch):
    import crdscope.connection.credentials as credentials

    monkeypatch.setattr(credentials, "EXEC_TIMEOUT_SECONDS", 1.0)
    script = _plugin(tmp_path, """
        import time
        time.sleep(60)  # deliberate: the hanging exec plugin under test (crdscope must cut it off at 1 s)
    """)
    path = write_config(tmp_path / "config", {"ex": _exec_user(script)}, current="ex")
    with pytest.raises(ConfigError, match="did not answer within 1s"):
        load_config(str(path))


def test_insecure_skip_tls_verify_and_proxy_and_server_name(tmp_path: Path):
    path = write_config(
        tmp_path / "config", {"u": {"token": "t"}}, current="u",
        cluster={"server": SERVER, "insecure-skip-tls-verify": True,
                 "proxy-url": "http://proxy.example.test:3128", "tls-server-name": "api.internal"},
    )
    config = load_config(str(path))
    assert config.insecure_skip_tls_verify
    assert config.proxy == "http://proxy.example.test:3128"
    assert config.tls_server_name == "api.internal"
    cluster = Cluster(config)
    import ssl

    for transport in (cluster.transport.primary, cluster.transport.fallback):
        # Requests go through the proxy, with verification off.
        assert type(transport._pool).__name__ == "AsyncHTTPProxy"
        assert transport._pool._proxy_url.host == b"proxy.example.test"
        assert transport._pool._ssl_context.verify_mode == ssl.CERT_NONE


def test_multiple_kubeconfig_files_merge_like_kubectl(tmp_path: Path, monkeypatch):
    first = write_config(tmp_path / "a", {"one": {"token": "from-a"}}, current="one")
    second = write_config(tmp_path / "b", {"one": {"token": "from-b"}, "two": {"token": "t2"}}, current="two")
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(first), str(tmp_path / "missing"), str(second)]))
    # current-context: the first file that sets it wins in kubectl; here both do.
    config = load_config(None, "two")
    assert config.context == "two" and config.kubeconfig == (str(first), str(second))
    # First definition of a name wins.
    assert load_config(None, "one").credentials.authorization() == "Bearer from-a"


def test_first_file_current_context_wins(tmp_path: Path, monkeypatch):
    first = write_config(tmp_path / "a", {"one": {"token": "x"}}, current="one")
    second = write_config(tmp_path / "b", {"two": {"token": "y"}}, current="two")
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(first), str(second)]))
    assert load_config().context == "one"


def test_missing_context_lists_the_ones_there(tmp_path: Path):
    path = write_config(tmp_path / "config", {"a": {"token": "x"}, "b": {"token": "y"}}, current="a")
    with pytest.raises(ConfigError, match=r"context 'nope' not found in kubeconfig \(contexts: a, b\)"):
        load_config(str(path), "nope")


def test_missing_kubeconfig_file(tmp_path: Path, monkeypatch):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(str(tmp_path / "absent"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ConfigError, match="no kubeconfig found"):
        load_config()


def test_invalid_yaml_names_file_and_line(tmp_path: Path):
    path = tmp_path / "config"
    path.write_text("apiVersion: v1\nclusters:\n  - name: [unclosed\n")
    with pytest.raises(ConfigError, match=r"config line \d+"):
        load_config(str(path))


def test_no_current_context(tmp_path: Path):
    path = write_config(tmp_path / "config", {"a": {"token": "x"}})
    with pytest.raises(ConfigError, match="no current-context"):
        load_config(str(path))


def test_expired_client_certificate(tmp_path: Path, ca: CertificateAuthority):
    past = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    pair = ca.client("old", not_before=past - dt.timedelta(days=30), not_after=past)
    path = write_config(
        tmp_path / "config",
        {"old": {"client-certificate-data": b64(pair.cert_pem), "client-key-data": b64(pair.key_pem)}},
        current="old",
    )
    with pytest.raises(ConfigError, match="client certificate of user 'old' expired on"):
        load_config(str(path))


async def test_in_cluster_service_account(tmp_path: Path, monkeypatch, ca: CertificateAuthority):
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_bytes(ca.pair().cert_pem)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    config = load_in_cluster_config(str(tmp_path))
    assert config.server == "https://10.96.0.1:443"
    assert config.ca_file == str(tmp_path / "ca.crt")
    assert (await sent_headers(config))["authorization"] == "Bearer sa-token"


async def test_401_refreshes_exec_credential_once(tmp_path: Path):
    script = _plugin(tmp_path, """
        import json, os
        state = os.environ["PLUGIN_STATE"]
        calls = int(open(state).read()) + 1 if os.path.exists(state) else 1
        open(state, "w").write(str(calls))
        print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                          "status": {"token": f"token-{calls}"}}))
    """)
    path = write_config(tmp_path / "config", {"ex": _exec_user(script)}, current="ex")
    config = load_config(str(path))
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["authorization"])
        return httpx.Response(401 if len(seen) == 1 else 200, json={})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler), auth=KubeAuth(config.credentials)) as c:
        response = await c.get(f"{SERVER}/version")
    assert response.status_code == 200
    assert seen == ["Bearer token-1", "Bearer token-2"]


def test_user_agent_and_timeouts(tmp_path: Path):
    from crdscope.base.version import USER_AGENT

    path = write_config(tmp_path / "config", {"u": {"token": "t"}}, current="u")
    cluster = Cluster(load_config(str(path)))
    assert cluster.client.headers["User-Agent"] == USER_AGENT
    assert USER_AGENT.startswith("crdscope/")
    timeout = cluster.client.timeout
    assert timeout.connect and timeout.read and timeout.pool  # explicit, never None


def test_cli_reports_kubeconfig_errors_in_one_line(tmp_path: Path):
    from click.testing import CliRunner

    from crdscope.cli.main import cli

    path = write_config(tmp_path / "config", {"a": {"token": "x"}}, current="a")
    result = CliRunner().invoke(cli, ["probe", "version", "--kubeconfig", str(path), "--context", "zzz"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "crdscope: context 'zzz' not found in kubeconfig (contexts: a)"
    ]
