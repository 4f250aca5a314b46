"""The API server's own health answers (``/readyz``, ``/livez``) and a cheap CRD count.

Used by the health probe on every run, and by callers that need one figure without a
monitor (the cost model's target).  Failures are results, never exceptions.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from crdscope.connection.cluster import Cluster, explain, status_message
from crdscope.connection.crdwatch import CRD_PATH
from crdscope.connection.transport import TRANSPORT_ERRORS

CHECK_TIMEOUT = httpx.Timeout(connect=5.0, read=10.0, write=10.0, pool=10.0)


@dataclass(frozen=True)
class CheckResult:
    """One ``/readyz?verbose`` or ``/livez?verbose`` answer."""

    ok: bool | None  # None: not allowed to ask
    failing: tuple[str, ...] = ()
    unreachable: bool = False
    error: str | None = None


def failing_check_names(text: str) -> tuple[str, ...]:
    """Names of the ``[-]name failed: ...`` lines of a verbose health answer."""
    names = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("[-]") and len(line) > 3:
            names.append(line[3:].split()[0])
    return tuple(names)


#: A ready server's liveness: /readyz includes the /livez checks, so it is not asked for.
LIVE_BECAUSE_READY = CheckResult(ok=True)


async def _get_again_if_broken(cluster: Cluster, path: str) -> httpx.Response:
    """GET ``path``, once more when the connection broke (a timeout is not retried)."""
    try:
        return await cluster.client.get(path, timeout=CHECK_TIMEOUT)
    except httpx.TimeoutException:
        raise
    except TRANSPORT_ERRORS:
        return await cluster.client.get(path, timeout=CHECK_TIMEOUT)


async def health_check(cluster: Cluster, endpoint: str) -> CheckResult:
    """GET ``/<endpoint>?verbose``; failures are results, never exceptions.

    A connection that breaks (not one that times out) is tried once more: behind a load balancer
    the API server that held it may have gone while another one serves, and the retry's new
    connection reaches that one.  A server that is really down fails the retry just as fast.
    """
    try:
        response = await _get_again_if_broken(cluster, f"/{endpoint}?verbose")
    except TRANSPORT_ERRORS as exc:
        return CheckResult(ok=False, unreachable=True, error=explain(exc, cluster.server))
    if response.status_code == 200:
        return CheckResult(ok=True)
    if response.status_code in (401, 403):
        return CheckResult(ok=None, error=f"/{endpoint} answered {response.status_code}: {status_message(response)}")
    failing = failing_check_names(response.text)
    error = None if failing else f"/{endpoint} answered {response.status_code}: {status_message(response)}"
    return CheckResult(ok=False, failing=failing, error=error)


async def count_crds(cluster: Cluster) -> tuple[int | None, str | None]:
    """The number of CRDs from one ``?limit=1`` list (``remainingItemCount`` + the item).

    Cheap on any cluster (one object crosses the wire); returns (None, reason) when not allowed.
    """
    try:
        response = await cluster.client.get(CRD_PATH, params={"limit": 1})
    except TRANSPORT_ERRORS as exc:
        return None, explain(exc, cluster.server)
    if response.status_code != 200:
        return None, f"listing CRDs answered {response.status_code}: {status_message(response)}"
    try:
        body = response.json()
    except ValueError:
        return None, "listing CRDs did not answer JSON"
    metadata = body.get("metadata") or {}
    remaining = metadata.get("remainingItemCount")
    if remaining is None and metadata.get("continue"):
        return None, "the server did not say how many CRDs remain (no remainingItemCount)"
    return len(body.get("items") or []) + int(remaining or 0), None
