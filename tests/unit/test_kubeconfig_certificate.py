"""The kubeconfig reader's own DER reading of certificate dates, against the cryptography package."""

from __future__ import annotations

import datetime as dt
import glob
import warnings

import pytest
from cryptography import x509

from crdscope.lab.pki import CertificateAuthority
from crdscope.connection.kubeconfig import certificate_validity


def expected(pem: bytes) -> tuple[dt.datetime, dt.datetime]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # old system roots with non-positive serials
        certificate = x509.load_pem_x509_certificate(pem)
    return certificate.not_valid_before_utc, certificate.not_valid_after_utc


def test_lab_certificates_including_expired_ones():
    ca = CertificateAuthority("validity")
    past = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    pairs = [ca.pair(), ca.client("a", ["g"]),
             ca.client("old", not_before=past - dt.timedelta(days=30), not_after=past)]
    for pair in pairs:
        assert certificate_validity(pair.cert_pem) == expected(pair.cert_pem)


def test_system_roots_with_both_time_encodings():
    paths = sorted(glob.glob("/etc/ssl/certs/*.pem"))
    if not paths:
        pytest.skip("no system certificates")
    for path in paths:
        pem = open(path, "rb").read()
        assert certificate_validity(pem) == expected(pem), path


@pytest.mark.parametrize("pem", [b"", b"not a certificate", b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"])
def test_garbage_is_a_value_error(pem: bytes):
    with pytest.raises((ValueError, IndexError)):
        certificate_validity(pem)
