"""Sizes read as Kubernetes reads resource quantities (issue 25: ``M`` is 10^6, ``Mi`` 2^20)."""

from __future__ import annotations

import pytest

from crdscope.lab.cgroups import parse_size
from crdscope.base.errors import ConfigError
from crdscope.base.quantity import parse_quantity


@pytest.mark.parametrize(("text", "expected"), [
    ("768Mi", 768 * 2**20), ("2Gi", 2 * 2**30), ("1500M", 1_500_000_000), ("1.5G", 1_500_000_000),
    ("700M", 700_000_000), ("64Ki", 65_536), ("12k", 12_000), ("129e6", 129_000_000), ("1048576", 1 << 20),
    (" 1.5Gi ", 3 * 2**29), ("1T", 10**12),
])
def test_quantities_mean_what_they_mean_in_a_pod_spec(text, expected):
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(("text", "hint"), [
    ("500m", "m is milli"), ("2gi", "use Gi"), ("1GB", "not a Kubernetes one"), ("1.5Gib", "not a Kubernetes one"), ("1.5 Gi", "write it as Kubernetes does"),
    ("", "write it as Kubernetes does"), ("-1Gi", "write it as Kubernetes does"), ("1e9Mi", "exponent"),
])
def test_anything_else_is_one_line_naming_the_fix(text, hint):
    with pytest.raises(ConfigError) as caught:
        parse_quantity(text)
    message = str(caught.value)
    assert hint in message and "\n" not in message


def test_a_lab_limit_is_a_quantity_and_still_refuses_what_cannot_hold_a_server():
    assert parse_size("700M") == 700_000_000  # was read as 700 MiB before
    assert parse_size("700Mi") == 700 * 2**20
    with pytest.raises(ConfigError, match="below 64 MiB"):  # a bad flag (exit 2), not a lab failure
        parse_size("60M")
    with pytest.raises(ConfigError, match="m is milli"):
        parse_size("700m")
