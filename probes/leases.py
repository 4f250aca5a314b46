"""How many kube-apiservers a cluster runs, from their identity Leases.

Each kube-apiserver (feature APIServerIdentity, on by default since 1.26)
renews a Lease in ``kube-system`` labelled
``apiserver.kubernetes.io/identity=kube-apiserver`` every 10 s.  The Lease is
named after a hash of the host name; its ``holderIdentity`` is that name plus a
UUID drawn at process start, so a replica that restarts on the same host keeps
its Lease and changes its holder.  A Lease whose renewal is older than
:data:`STALE_AFTER_SECONDS` belongs to a replica that is gone (the API servers
delete such Leases only after an hour).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

import httpx

from crdscope.connection.cluster import Cluster, explain, status_message

log = logging.getLogger("crdscope.leases")

IDENTITY_LABEL = "apiserver.kubernetes.io/identity"
LEASES_PATH = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
SELECTOR = f"{IDENTITY_LABEL}=kube-apiserver"
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: Renewed every 10 s by a live API server: three missed renewals (and some clock skew) mean gone.
STALE_AFTER_SECONDS = 45.0


@dataclass(frozen=True)
class ApiserverLease:
    """One kube-apiserver identity Lease."""

    name: str
    holder: str
    renewed: float | None
    live: bool
    #: The host the replica runs on (the Lease's ``kubernetes.io/hostname`` label; else its name).
    host: str = ""


@dataclass(frozen=True)
class LeaseReading:
    """The identity Leases read once; ``error`` says why there are none."""

    leases: tuple[ApiserverLease, ...] = ()
    error: str | None = None

    @property
    def live(self) -> int | None:
        """Replicas renewing their Lease now (None when the Leases could not be read)."""
        return None if self.error else sum(1 for lease in self.leases if lease.live)


def parse_time(text: object) -> float | None:
    """A Lease's RFC 3339 MicroTime as a UNIX time, None when absent or malformed."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def parse_leases(body: object, now: float) -> tuple[ApiserverLease, ...]:
    """The identity Leases of a LeaseList (malformed items skipped)."""
    found = []
    items = body.get("items") if isinstance(body, dict) else None
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict):
            continue
        metadata = item.get("metadata") or {}
        spec = item.get("spec") or {}
        name = metadata.get("name")
        if not isinstance(name, str):
            continue
        renewed = parse_time(spec.get("renewTime"))
        live = renewed is not None and now - renewed <= STALE_AFTER_SECONDS
        labels = metadata.get("labels")
        host = str((labels.get(HOSTNAME_LABEL) if isinstance(labels, dict) else None) or name)
        found.append(ApiserverLease(name, str(spec.get("holderIdentity") or ""), renewed, live, host))
    return tuple(sorted(found, key=lambda lease: lease.name))


async def read_leases(cluster: Cluster, now: float) -> LeaseReading:
    """List the identity Leases; failures (403 included) come back as ``error``."""
    try:
        response = await cluster.client.get(LEASES_PATH, params={"labelSelector": SELECTOR})
    except httpx.HTTPError as exc:
        return LeaseReading(error=explain(exc, cluster.server))
    if response.status_code != 200:
        return LeaseReading(error=f"listing kube-system Leases answered {response.status_code}: "
                                  f"{status_message(response)}")
    try:
        body = response.json()
    except ValueError:
        return LeaseReading(error="listing kube-system Leases did not answer JSON")
    return LeaseReading(parse_leases(body, now))


class LeaseWatcher:
    """Counts, between readings, Leases whose holder changed (replaced) and Leases that appeared.

    A holder is drawn by each kube-apiserver process at start, so a replaced holder is one
    restart of that replica (two restarts between two readings look like one).
    """

    def __init__(self) -> None:
        self.holders: dict[str, str] | None = None
        self.replacements = 0
        self.appeared = 0
        #: Replica host -> holder changes seen (restarts of that replica).
        self.replaced_hosts: dict[str, int] = {}

    def observe(self, reading: LeaseReading) -> list[ApiserverLease]:
        """Compare with the previous reading; returns the Leases whose holder changed since it
        (an unreadable reading changes nothing)."""
        if reading.error:
            return []
        replaced = []
        holders = {lease.name: lease.holder for lease in reading.leases}
        if self.holders is not None:
            for lease in reading.leases:
                before = self.holders.get(lease.name)
                if before is None:
                    self.appeared += 1
                    log.info("kube-apiserver Lease %s appeared (a new replica)", lease.name)
                elif before != lease.holder:
                    self.replacements += 1
                    self.replaced_hosts[lease.host] = self.replaced_hosts.get(lease.host, 0) + 1
                    replaced.append(lease)
                    log.warning("kube-apiserver Lease %s changed holder (replica %s restarted)", lease.name, lease.host)
        self.holders = holders
        return replaced
