"""Sizes written as Kubernetes writes them: resource quantities (``768Mi``, ``2Gi``, ``1.5G``).

One rule for every size crdscope accepts (``--memory-limit``, ``lab up --memory-limit``,
``lab limit``), so a value copied from a Pod spec means here what it means there: binary
suffixes ``Ki Mi Gi Ti Pi Ei`` are powers of 1024, decimal ones ``k M G T P E`` powers of 1000,
an exponent (``129e6``) is allowed, and a bare number is bytes.  ``m`` is milli in Kubernetes
(``500m`` of memory is half a byte): refused with a hint, as are ``MB``-style units Kubernetes
does not read.
"""

from __future__ import annotations

import re

from .errors import ConfigError

BINARY = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60}
DECIMAL = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QUANTITY = re.compile(r"\s*(?P<number>\d+(?:\.\d*)?|\.\d+)(?:[eE](?P<exponent>[-+]?\d+))?(?P<suffix>[A-Za-z]*)\s*")


def parse_quantity(text: str, *, what: str = "size") -> int:
    """Bytes from a Kubernetes quantity; a :class:`ConfigError` (one line) for anything else."""
    match = _QUANTITY.fullmatch(text or "")
    if not match:
        raise ConfigError(f"cannot read {what} {text!r}: write it as Kubernetes does (768Mi, 2Gi, 1500M, 1.5G)")
    suffix = match["suffix"]
    if match["exponent"] is not None and suffix:
        raise ConfigError(f"cannot read {what} {text!r}: an exponent takes no unit (129e6, or 129M)")
    multiplier = BINARY.get(suffix) or DECIMAL.get(suffix)
    if multiplier is None:
        hint = {"m": "Mi or M (m is milli)", "mi": "Mi", "gi": "Gi", "g": "Gi or G", "K": "k or Ki"}.get(
            suffix, "Ki, Mi, Gi (1024s) or k, M, G (1000s)")
        raise ConfigError(f"cannot read {what} {text!r}: unit {suffix!r} is not a Kubernetes one; use {hint} "
                          "(768Mi, 2Gi, 1500M)")
    value = float(match["number"]) * multiplier * (10 ** int(match["exponent"]) if match["exponent"] else 1)
    return int(value)
