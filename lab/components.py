"""What the lab runs: its certificates, its etcd and each kube-apiserver's command line.

Kept apart from ``controlplane.py`` (which starts, waits on and records them) so that a
control plane of several API servers reuses :func:`apiserver_component` once per server.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from typing import TYPE_CHECKING

from . import rbac
from crdscope.base.labrecord import Component

if TYPE_CHECKING:  # the pki module imports cryptography: `crdscope lab status` does without it
    from .pki import CertificateAuthority, KeyPair


@dataclass(frozen=True)
class LabOptions:
    """How ``lab up`` runs the API server beyond the defaults."""

    name: str = ""
    feature_gates: str = ""
    #: Extra kube-apiserver flags, passed through as given (``--flag=value``).
    apiserver_args: tuple[str, ...] = ()
    #: cgroup memory limit of each kube-apiserver in bytes (0: none).
    memory_limit: int = 0
    #: Restart a dead kube-apiserver like a kubelet (None: on when there is a memory limit).
    restart: bool | None = None
    #: kube-apiservers on the one etcd (more than one: behind haproxy, lab/balancer.py).
    apiservers: int = 1

    @property
    def supervised(self) -> bool:
        return self.restart if self.restart is not None else self.memory_limit > 0


@dataclass(frozen=True)
class Pki:
    """The lab's certificates on disk, and the client pairs for the kubeconfig."""

    directory: Path
    ca: CertificateAuthority
    ca_cert: Path
    serving_cert: Path
    serving_key: Path
    admin: KeyPair
    restricted: KeyPair


def write_pki(run_dir: Path) -> Pki:
    """A fresh CA, the serving pair, the admin and restricted users and the service-account key."""
    directory = run_dir / "pki"
    from .pki import CertificateAuthority, signing_key_pem

    ca = CertificateAuthority()
    ca_cert, _ = ca.pair().write(directory, "ca")
    serving_cert, serving_key = ca.serving(["127.0.0.1", "localhost", "::1"]).write(directory, "apiserver")
    admin = ca.client("crdscope-lab-admin", ["system:masters"])
    admin.write(directory, "admin")
    restricted = ca.client(rbac.RESTRICTED_USER, [])
    sa_key, sa_pub = signing_key_pem()
    (directory / "sa.key").write_bytes(sa_key)
    (directory / "sa.pub").write_bytes(sa_pub)
    return Pki(directory, ca, ca_cert, serving_cert, serving_key, admin, restricted)


def etcd_component(etcd_bin: Path, run_dir: Path, port: int, peer_port: int) -> Component:
    """The lab's one etcd, listening on ``port`` (clients) and ``peer_port``."""
    return Component(
        name="etcd",
        role="etcd",
        argv=[
            str(etcd_bin),
            "--name=lab",
            f"--data-dir={run_dir / 'etcd-data'}",
            f"--listen-client-urls=http://127.0.0.1:{port}",
            f"--advertise-client-urls=http://127.0.0.1:{port}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-cluster=lab=http://127.0.0.1:{peer_port}",
            # A throwaway lab: fsync costs seconds per CRD batch on small disks and
            # a killed process (not a crashed machine) loses nothing without it.
            "--unsafe-no-fsync",
            "--quota-backend-bytes=8589934592",
            "--log-level=warn",
        ],
        log=str(run_dir / "logs" / "etcd.log"),
        port=port,
    )


def apiserver_component(apiserver_bin: Path, pki: Pki, *, etcd_port: int, port: int, name: str = "apiserver",
                        options: LabOptions = LabOptions(), issuer_port: int | None = None,
                        hostname: str = "") -> Component:
    """One kube-apiserver named ``name`` on ``port``, its log under the run directory.

    Replicas share ``issuer_port`` (tokens one mints, the others accept) and each gets its own
    ``hostname``: the API server names its identity Lease after it.
    """
    argv = [
        str(apiserver_bin),
        f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        # The endpoint reconciler refuses loopback addresses; a lab has no Service to keep.
        "--endpoint-reconciler-type=none",
        f"--secure-port={port}",
        f"--cert-dir={pki.directory}",
        f"--tls-cert-file={pki.serving_cert}",
        f"--tls-private-key-file={pki.serving_key}",
        f"--client-ca-file={pki.ca_cert}",
        "--authorization-mode=RBAC",
        "--enable-priority-and-fairness=true",
        "--service-cluster-ip-range=10.0.0.0/24",
        "--allow-privileged=true",
        "--disable-admission-plugins=ServiceAccount",
        f"--service-account-issuer=https://127.0.0.1:{issuer_port or port}",
        f"--service-account-key-file={pki.directory / 'sa.pub'}",
        f"--service-account-signing-key-file={pki.directory / 'sa.key'}",
        "--v=1",
    ]
    if options.feature_gates:
        argv.append(f"--feature-gates={options.feature_gates}")
    argv.extend(options.apiserver_args)  # last, so a user's flag wins over a default
    log_name = "kube-apiserver.log" if name == "apiserver" else f"kube-{name}.log"
    return Component(name=name, role="apiserver", argv=argv, log=str(pki.directory.parent / "logs" / log_name),
                     port=port, hostname=hostname)
