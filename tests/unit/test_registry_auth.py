"""Registry credentials (loader/registry_auth.py): which config.json crane and crank read, where a
registry's credentials come from, a refusal as one line, and no secret ever repeated.

The words are the real crane's and crank's (v0.20 / Crossplane v2.0.0's CLI) against Debian's
docker-registry with htpasswd; tests/e2e/test_private_registry.py runs them for real.
"""

from __future__ import annotations

import base64
import json
import stat
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from crdscope.base.errors import ConfigError
from crdscope.loader import registry_auth
from crdscope.loader.registry_auth import (
    RegistryConfig, challenge, named_config, redact, refusal, refused_status, registry_config, use_registry_config,
)

HOST = "127.0.0.1:5917"
PASSWORD = "pw-Zq8v-41xT"
AUTH = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
# crane digest, no credentials / wrong ones (both the same words); crank xpkg push; a token registry's denial.
CRANE_401 = (f"GET http://{HOST}/v2/crdscope/x/manifests/v1: UNAUTHORIZED: authentication required; "
             "[map[Action:pull Class: Name:crdscope/x Type:repository]]")
CRANK_401 = (f"crossplane: error: failed to push package file /tmp/out/demo-v0.1.0.xpkg: HEAD http://{HOST}/v2/"
             "crdscope/demo/manifests/v0.1.0: unexpected status code 401 Unauthorized (HEAD responses have no body, "
             "use GET for details)")
DENIED = "GET https://r.example.com/v2/team/p/manifests/v1: DENIED: requested access to the resource is denied"
HELPER_MISSING = ('error getting credentials - err: exec: "docker-credential-crdtest": executable file not found in '
                  "$PATH, out: ``")
HELPER_SAID = f"error getting credentials - err: exit status 1, out: `{PASSWORD} leaked by a helper`"


def config(content: dict, tmp_path) -> RegistryConfig:
    file = tmp_path / "config.json"
    file.write_text(json.dumps(content))
    return RegistryConfig(file, content=content)


@pytest.fixture(autouse=True)
def no_named_config():
    yield
    use_registry_config(None)


@pytest.fixture
def quiet_registry(monkeypatch):
    """The realm probe answers nothing (a unit test reaches no registry)."""
    monkeypatch.setattr(registry_auth, "ask_challenge", lambda host, loopback: "")


@pytest.mark.parametrize("said, status", [(CRANE_401, 401), (CRANK_401, 401), (DENIED, 403),
                                          ("HEAD https://r/v2/x/manifests/v1: unexpected status code 403 Forbidden", 403),
                                          ("MANIFEST_UNKNOWN: manifest unknown; map[Tag:v1]", None),
                                          ("dial tcp 127.0.0.1:1: connect: connection refused", None)])
def test_a_refusal_is_told_from_other_failures_by_its_status(said, status):
    assert refused_status(said) == status


@pytest.mark.parametrize("header, shown", [
    ('Basic realm="crdscope-lab"', 'Basic realm "crdscope-lab"'),
    ('Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:x:pull"',
     'Bearer realm "https://auth.example.com/token"'),
    ("Basic realm=lab", 'Basic realm "lab"'),
    ("Negotiate", "Negotiate"),
    ("", ""),
])
def test_a_challenge_is_shown_by_its_scheme_and_realm(header, shown):
    assert challenge(header) == shown


def test_where_credentials_come_from_is_said_as_docker_finds_them(tmp_path):
    assert config({"auths": {f"http://{HOST}/v1/": {"auth": AUTH}}}, tmp_path).offered(HOST) == \
        f"the credentials for {HOST} in {tmp_path / 'config.json'}"
    helper = config({"auths": {HOST: {"auth": AUTH}}, "credHelpers": {HOST: "crdtest"}}, tmp_path)
    assert helper.offered(HOST).startswith(f"the credentials docker-credential-crdtest gave for {HOST}")
    store = config({"credsStore": "pass"}, tmp_path)
    assert store.helper_for("any.example.com") == "pass"
    assert config({"auths": {"other:5000": {"auth": AUTH}}}, tmp_path).offered(HOST).startswith("no credentials")
    absent = RegistryConfig(tmp_path / "nowhere" / "config.json")
    assert absent.offered(HOST) == f"no credentials for {HOST} in {tmp_path / 'nowhere' / 'config.json'} (absent)"


def test_docker_config_names_the_folder_read_when_no_file_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({"auths": {HOST: {"auth": AUTH}}}))
    chosen = registry_config()
    assert chosen.file == tmp_path / "config.json" and not chosen.named and chosen.environment() is None
    assert chosen.has_entry(HOST)


def test_a_named_file_reaches_the_children_through_a_private_docker_config_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "elsewhere"))
    file = tmp_path / "team-registry.json"
    file.write_text(json.dumps({"auths": {HOST: {"auth": AUTH}}}))
    use_registry_config(str(file))
    chosen = registry_config()
    assert chosen.named and chosen.file == file
    environment = chosen.environment()
    assert environment is not None
    folder = environment["DOCKER_CONFIG"]
    assert folder == str(chosen.folder) and folder != str(tmp_path / "elsewhere")
    assert json.loads((chosen.folder / "config.json").read_text()) == {"auths": {HOST: {"auth": AUTH}}}
    assert stat.S_IMODE(chosen.folder.stat().st_mode) == 0o700


@pytest.mark.parametrize("content, says", [(None, "no such file"), ("{not json", "not JSON"),
                                           ("[1, 2]", "not a JSON object")])
def test_a_named_file_that_is_not_a_docker_config_is_one_line_and_exit_2(content, says, tmp_path):
    file = tmp_path / "config.json"
    if content is not None:
        file.write_text(content)
    with pytest.raises(ConfigError) as raised:
        named_config(str(file))
    assert str(raised.value) == f"--registry-config {file}: {says}" + (
        " (Docker's config.json format)" if content else "")
    assert raised.value.exit_code == 2


def test_every_secret_of_the_file_is_cleaned_from_what_is_shown(tmp_path):
    chosen = config({"auths": {HOST: {"auth": AUTH}, "r.example.com": {"identitytoken": "tok-12345678"}}}, tmp_path)
    said = f"failed: {AUTH} then {PASSWORD} then alice:{PASSWORD} then tok-12345678 and Basic {AUTH}"
    cleaned = redact(said, chosen)
    assert PASSWORD not in cleaned and AUTH not in cleaned and "tok-12345678" not in cleaned
    assert cleaned.startswith("failed: [redacted]")


def test_no_credentials_is_one_line_naming_the_registry_its_realm_and_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(registry_auth, "ask_challenge", lambda host, loopback: 'Basic realm "crdscope-lab"')
    chosen = RegistryConfig(tmp_path / "config.json")
    error = refusal("R", HOST, CRANE_401, loopback=True, config=chosen)
    assert error is not None and error.exit_code == 3
    assert str(error) == (f'R: registry {HOST} refused access (401 Unauthorized, Basic realm "crdscope-lab"): '
                          f"no credentials for {HOST} in {tmp_path / 'config.json'} (absent): log in with "
                          f"`docker login {HOST}` or give --registry-config FILE")


def test_credentials_refused_say_where_they_came_from_and_never_what_they_are(tmp_path, quiet_registry):
    chosen = config({"auths": {HOST: {"auth": AUTH}}}, tmp_path)
    error = refusal("crank xpkg push R", HOST, CRANK_401, loopback=True, pushing=True, config=chosen)
    assert error is not None and error.exit_code == 3
    assert str(error) == (f"crank xpkg push R: registry {HOST} refused access (401 Unauthorized): the credentials "
                          f"for {HOST} in {tmp_path / 'config.json'} were not accepted")
    denied = refusal("R", "r.example.com", DENIED, loopback=False,
                     config=config({"auths": {"r.example.com": {"auth": AUTH}}}, tmp_path))
    assert denied is not None and "(403 Forbidden)" in str(denied) and "not allowed to pull" in str(denied)
    assert PASSWORD not in str(error) + str(denied) and AUTH not in str(error) + str(denied)


def test_a_credential_helper_that_fails_is_named_and_its_output_never_repeated(tmp_path, quiet_registry):
    chosen = config({"credHelpers": {HOST: "crdtest"}}, tmp_path)
    missing = refusal("R", HOST, HELPER_MISSING, loopback=True, config=chosen)
    assert str(missing) == (f"R: no credentials for registry {HOST}: docker-credential-crdtest (named in "
                            f"{tmp_path / 'config.json'} for {HOST}) failed: it is not on PATH")
    failed = refusal("R", HOST, HELPER_SAID, loopback=True, config=chosen)
    assert failed is not None and str(failed).endswith("failed: exit status 1") and PASSWORD not in str(failed)


def test_other_failures_are_not_refusals(tmp_path, quiet_registry):
    assert refusal("R", HOST, "MANIFEST_UNKNOWN: manifest unknown", loopback=True,
                   config=RegistryConfig(tmp_path / "config.json")) is None


class _Challenging(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(401 if self.path == "/v2/" else 404)
        self.send_header("WWW-Authenticate", 'Basic realm="crdscope-lab"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_the_realm_is_asked_of_the_registry_without_credentials():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Challenging)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host = f"127.0.0.1:{server.server_address[1]}"
        assert registry_auth.ask_challenge(host, loopback=True) == 'Basic realm "crdscope-lab"'
    finally:
        server.shutdown()
        server.server_close()
