"""A real TLS webhook server on loopback: a CRD's conversion webhook and an admission webhook.

The lab has no cluster DNS and no Services, so the API server reaches it by ``clientConfig.url``
(``https://127.0.0.1:PORT/convert``) and trusts it through the ``caBundle`` of a CA made for it
(the lab's own :class:`crdscope.lab.pki.CertificateAuthority`, built on ``cryptography``).

It is what a provider's webhook is to the API server, in three states a test moves it through:

* healthy: converts every object to the desired version (the schemas of the versions are alike,
  so setting ``apiVersion`` is the whole conversion) and allows every admission request;
* slow: the same answers, each after ``delay_seconds`` (a provider short of CPU);
* stopped: nothing listens on the port (a provider's pod down, scaled to zero or OOM-killed):
  the API server's calls get "connection refused".

``conversion_crd`` writes the CRD that uses it (storage ``v1``, ``v1beta1`` served too): reading
``v1beta1`` makes the API server convert every stored object through the webhook, and count it.
"""

from __future__ import annotations

import base64
import json
import ssl
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from crdscope.lab.pki import CertificateAuthority

#: The versions of :func:`conversion_crd`: objects are stored in the first, the second is served too.
STORAGE_VERSION, OTHER_VERSION = "v1", "v1beta1"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        owner = self.server.owner
        owner.wait_if_slow()
        if self.path.startswith("/convert"):
            answer = convert(body)
            owner.count("conversions")
        else:
            answer = allow(body)
            owner.count("admissions")
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the API server calls it for every read of the converted kind."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True  # stopped, then started again on the same port (the URL in the CRD)

    def __init__(self, port: int, owner: WebhookServer) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.owner = owner


def convert(review: dict[str, Any]) -> dict[str, Any]:
    """A ``ConversionReview`` answered: every object moved to the desired version."""
    request = review.get("request") or {}
    desired = request.get("desiredAPIVersion", "")
    objects = [{**obj, "apiVersion": desired} for obj in request.get("objects") or []]
    return {"apiVersion": review.get("apiVersion", "apiextensions.k8s.io/v1"), "kind": "ConversionReview",
            "response": {"uid": request.get("uid", ""), "convertedObjects": objects,
                         "result": {"status": "Success"}}}


def allow(review: dict[str, Any]) -> dict[str, Any]:
    """An ``AdmissionReview`` answered: allowed."""
    request = review.get("request") or {}
    return {"apiVersion": review.get("apiVersion", "admission.k8s.io/v1"), "kind": "AdmissionReview",
            "response": {"uid": request.get("uid", ""), "allowed": True}}


class WebhookServer:
    """The webhook on ``127.0.0.1:port`` over TLS; :meth:`start`, :meth:`slow`, :meth:`stop`."""

    def __init__(self) -> None:
        authority = CertificateAuthority("crdscope-test-webhook-ca")
        self.ca_pem = authority.pair().cert_pem
        serving = authority.serving(["127.0.0.1"])
        self._directory = tempfile.TemporaryDirectory(prefix="crdscope-webhook-")
        cert, key = serving.write(Path(self._directory.name), "webhook")
        self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._tls.load_cert_chain(cert, key)
        self.delay_seconds = 0.0
        self.port = 0
        self.served = {"conversions": 0, "admissions": 0}
        self._lock = threading.Lock()
        self._slow = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def ca_bundle(self) -> str:
        """The ``caBundle`` of a webhook's ``clientConfig``: the CA's PEM, base64."""
        return base64.b64encode(self.ca_pem).decode()

    def url(self, path: str = "/convert") -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> WebhookServer:
        """Listen (again) on the same port, answering at once."""
        if self._server is not None:
            return self
        self.healthy()
        server = _Server(self.port, self)
        server.socket = self._tls.wrap_socket(server.socket, server_side=True)
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="webhook-server", daemon=True)
        self._thread.start()
        return self

    def healthy(self) -> None:
        self.delay_seconds = 0.0
        self._slow.clear()

    def slow(self, delay_seconds: float) -> None:
        """Answer every request after ``delay_seconds``."""
        self.delay_seconds = delay_seconds
        self._slow.set()

    def wait_if_slow(self) -> None:
        """The slowness itself (a webhook short of CPU), not a wait for a condition."""
        if self._slow.is_set():
            threading.Event().wait(self.delay_seconds)

    def count(self, what: str) -> None:
        with self._lock:
            self.served[what] += 1

    def stop(self) -> None:
        """Close the port: the API server's next call is refused."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def close(self) -> None:
        self.stop()
        self._directory.cleanup()

    # -- what points at it --------------------------------------------------------------------

    def conversion_crd(self, group: str = "webhooks.crdscope.dev", kind: str = "Widget") -> dict[str, Any]:
        """A CRD converted by this webhook: storage ``v1``, ``v1beta1`` served too, same schema."""
        plural = kind.lower() + "s"
        schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
        return {
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {
                "group": group, "scope": "Cluster",
                "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
                "versions": [{"name": version, "served": True, "storage": version == STORAGE_VERSION,
                              "schema": schema} for version in (STORAGE_VERSION, OTHER_VERSION)],
                "conversion": {"strategy": "Webhook", "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"url": self.url("/convert"), "caBundle": self.ca_bundle}}},
            },
        }

    def validating_configuration(self, name: str, group: str, plural: str, *, failure_policy: str = "Ignore",
                                 operations: tuple[str, ...] = ("CREATE", "UPDATE")) -> dict[str, Any]:
        """A ValidatingWebhookConfiguration named ``name`` sending ``operations`` on ``group``'s ``plural``
        to this webhook, as the webhook ``<name>.<group>`` (the name the server's metrics carry)."""
        return {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{
                "name": f"{name}.{group}", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "failurePolicy": failure_policy, "timeoutSeconds": 5,
                "clientConfig": {"url": self.url("/validate"), "caBundle": self.ca_bundle},
                "rules": [{"apiGroups": [group], "apiVersions": ["*"], "resources": [plural],
                           "operations": list(operations), "scope": "*"}],
            }],
        }
