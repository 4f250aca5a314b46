"""``crdscope mrap --apply``: write the planned MRAP and wait until every CRD it activates is Established.

Server-side apply with crdscope's field manager, only to a context the user named (``--context
NAME``), and never over an MRAP crdscope did not create (its label says so): the user's own MRAPs
are read, judged and left as they are.  Nothing is ever deleted.  The wait reads the MRD Table (one
list a second, whatever the number of kinds) until each matched MRD is Active and Established
(crossplane/crossplane#7822: until then clients get "no matches for kind").
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

from crdscope.base.activation import MANAGED_BY, MRAP_API_VERSION, MRAP_KIND, Plan
from crdscope.base.globs import go_match
from crdscope.base.errors import ClusterError, ConfigError
from crdscope.connection.cluster import Cluster, explain, raise_for_status
from crdscope.connection.crossplane_read import TABLE_ACCEPT, TABLE_PAGE, list_all, parse_mrd_table
from crdscope.connection.kubeconfig import load_config
from crdscope.connection.transport import TRANSPORT_ERRORS

from .planner import MRAPS_PATH, MRDS_PATH

FIELD_MANAGER = "crdscope"
POLL_SECONDS = 1.0


def _body(plan: Plan) -> dict[str, object]:
    return {"apiVersion": MRAP_API_VERSION, "kind": MRAP_KIND,
            "metadata": {"name": plan.name, "labels": {MANAGED_BY[0]: MANAGED_BY[1]}},
            "spec": {"activate": list(plan.patterns)}}


async def apply_plan(plan: Plan, context: str | None, kubeconfig: str | None, timeout: float,
                     say: Callable[[str], None]) -> None:
    """Apply ``plan`` and report each CRD it activates as it becomes Established."""
    config = load_config(kubeconfig, context)
    if context is None or context != config.context:
        raise ConfigError(f"--apply writes an MRAP to context '{config.context}' ({config.server}): only with "
                          f"--context {config.context} spelled out")
    if not plan.entries:
        raise ConfigError("the plan activates nothing (no composed kind, no kind in use): nothing to apply")
    path = f"{MRAPS_PATH}/{plan.name}"
    async with Cluster(config) as cluster:
        try:
            existing = await cluster.client.get(path)
            if existing.status_code == 200:
                labels = (existing.json().get("metadata") or {}).get("labels") or {}
                if labels.get(MANAGED_BY[0]) != MANAGED_BY[1]:
                    raise ConfigError(f"MRAP {plan.name} exists and crdscope did not create it: it is left as it "
                                      "is; name the plan otherwise with --name")
            elif existing.status_code != 404:
                raise_for_status(existing)
            answer = await cluster.client.patch(
                path, params={"fieldManager": FIELD_MANAGER, "force": "true"}, content=json.dumps(_body(plan)),
                headers={"Content-Type": "application/apply-patch+yaml"})
            raise_for_status(answer)
            say(f"applied MRAP {plan.name} ({len(plan.entries)} entries) to {config.context}")
            await _wait_established(cluster, plan, timeout, say)
        except TRANSPORT_ERRORS as exc:
            raise ClusterError(explain(exc, cluster.server)) from None


async def _wait_established(cluster: Cluster, plan: Plan, timeout: float, say: Callable[[str], None]) -> None:
    started = time.monotonic()
    reported: set[str] = set()
    while True:
        answer = await list_all(cluster, MRDS_PATH, accept=TABLE_ACCEPT, limit=TABLE_PAGE, cached=False)
        if isinstance(answer, str):
            raise ClusterError(f"cannot read the MRDs while waiting: {answer}")
        rows = [r for r in parse_mrd_table({"columnDefinitions": answer[1], "rows": answer[0]})
                if any(go_match(p, r.name) for p in plan.patterns)]
        for row in sorted(rows, key=lambda r: r.name):
            if row.name not in reported and row.state == "Active" and row.established:
                reported.add(row.name)
                say(f"  established {row.name} after {time.monotonic() - started:.1f} s")
        pending = sorted(r.name for r in rows if r.name not in reported)
        if rows and not pending:
            say(f"all {len(rows)} CRDs of the plan are Established ({time.monotonic() - started:.1f} s)")
            return
        if time.monotonic() - started > timeout:
            raise ClusterError(f"{len(pending)} of {len(rows)} CRDs of the plan not Established after {timeout:.0f} s: "
                               f"{', '.join(pending[:5])}{', ...' if len(pending) > 5 else ''}")
        await asyncio.sleep(POLL_SECONDS)  # polling the API server's answer on its own cadence, not a test sync
