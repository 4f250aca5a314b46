"""The lab's own certificate authority: serving and client certificates.

EC P-256 keys: fast to generate on every ``lab up`` and accepted by
kube-apiserver, etcd, kubectl and Python's ssl alike.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate and its PEM private key."""

    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path, name: str) -> tuple[Path, Path]:
        """Write ``name.crt`` and ``name.key`` (0600) into ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
        cert_path.write_bytes(self.cert_pem)
        key_path.touch(mode=0o600)
        key_path.write_bytes(self.key_pem)
        return cert_path, key_path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)  # tolerate clock skew


class CertificateAuthority:
    """A self-signed CA that signs the lab's serving and client certificates."""

    def __init__(self, common_name: str = "crdscope-lab-ca") -> None:
        self._key = _key()
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        self._name = name
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_now())
            .not_valid_after(_now() + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, key_cert_sign=True, crl_sign=True,
                    content_commitment=False, key_encipherment=False, data_encipherment=False,
                    key_agreement=False, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )

    @classmethod
    def load(cls, cert_pem: bytes, key_pem: bytes) -> CertificateAuthority:
        """Re-open a CA written by :meth:`pair` (to mint more users later)."""
        self = cls.__new__(cls)
        self.cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError("the lab's CA key is not an elliptic-curve key (written by another tool?)")
        self._key = key
        self._name = self.cert.subject
        return self

    def pair(self) -> KeyPair:
        """The CA's own certificate and key."""
        return KeyPair(self.cert.public_bytes(serialization.Encoding.PEM), _key_pem(self._key))

    def _issue(
        self,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        sans: list[x509.GeneralName] | None = None,
        not_after: dt.datetime | None = None,
        not_before: dt.datetime | None = None,
    ) -> KeyPair:
        key = _key()
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before or _now())
            .not_valid_after(not_after or _now() + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))

    def serving(self, hosts: list[str]) -> KeyPair:
        """A server certificate valid for the given host names and IP addresses."""
        sans: list[x509.GeneralName] = []
        for host in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])])
        return self._issue(subject, ExtendedKeyUsageOID.SERVER_AUTH, sans)

    def client(
        self,
        user: str,
        groups: list[str] | tuple[str, ...] = (),
        *,
        not_after: dt.datetime | None = None,
        not_before: dt.datetime | None = None,
    ) -> KeyPair:
        """A client certificate: CN is the Kubernetes user, O entries its groups."""
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, user)]
        attributes += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        return self._issue(
            x509.Name(attributes), ExtendedKeyUsageOID.CLIENT_AUTH,
            not_after=not_after, not_before=not_before,
        )


def signing_key_pem() -> tuple[bytes, bytes]:
    """A service-account signing key: (private PEM, public PEM)."""
    key = _key()
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return _key_pem(key), public
