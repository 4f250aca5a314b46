"""The marks crdscope puts on the CRDs it creates, defined once: the CRD watch reads them (which CRDs are
crdscope's, from which load run), the loader writes them.

A module of its own, with no import: a loader source or the cost model reads them without the
connection stack (httpx, TLS) that :mod:`connection.crdwatch` brings.
"""

from __future__ import annotations

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "crdscope"
RUN_ANNOTATION = "crdscope.dev/load-run"
