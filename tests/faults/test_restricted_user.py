"""Restricted users: every panel shows what they may and may not see; load and clean refuse, changing nothing.

Two users, both real certificates of the lab's CA:

* the lab's ``crdscope-lab-restricted`` context: the read-only monitor role
  (``lab/rbac.py``): every probe figure, but no CRD writes;
* ``crdscope-narrow``, minted here and bound to a role made here: discovery,
  OpenAPI and CRD reads only, so ``/metrics`` and the flowcontrol API answer 403.

Proves (Pilot, panels as a person reads them): what a user may see is shown
with figures that agree with kubectl, what it may not see is named with the
server's reason (never a silent dash or zero); the loader started from the
TUI refuses with the missing permission named.  On the command line ``load``
and ``clean`` exit 3 naming the permission, and kubectl sees no change.
"""

from __future__ import annotations

import json

import pytest

from crdscope.base.settings import LoaderSettings, Settings
from tests.faults.helpers import crdscope
from tests.helpers import async_wait_for, start_loader_as_configured
from tests.tui.conftest import widget_text
from crdscope.tui.launch import build_app
from crdscope.tui.panels.discovery import DiscoveryPanel
from crdscope.tui.panels.health import HealthPanel
from crdscope.tui.panels.inventory import InventoryPanel
from crdscope.tui.panels.loader import LoaderPanel
from crdscope.tui.panels.openapi import OpenAPIPanel
from crdscope.tui.panels.throttling import ThrottlingPanel

pytestmark = pytest.mark.lab

NARROW = "crdscope-narrow"
FORBIDDEN_METRICS = 'cannot get path "/metrics"'
REFUSED_LOAD = "may not create, patch customresourcedefinitions.apiextensions.k8s.io"


def narrow_role() -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": NARROW},
         "rules": [{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/version", "/openapi", "/openapi/*"],
                    "verbs": ["get"]},
                   {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
                    "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": NARROW},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NARROW},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": NARROW}]}]})


@pytest.fixture
def narrow(lab, tmp_path):
    """(kubeconfig, context) of the narrow user; its role is removed afterwards."""
    lab.kubectl("apply", "-f", "-", input=narrow_role())
    yield str(lab.lab.mint_user(NARROW, path=tmp_path / "narrow.kubeconfig")), NARROW
    lab.kubectl("delete", "clusterrolebinding,clusterrole", NARROW, "--ignore-not-found")


@pytest.mark.parametrize("who", ["lab-restricted", "narrow"])
async def test_panels_show_what_the_user_may_and_may_not_see(lab, narrow, who):
    kubeconfig, context = (lab.kubeconfig, lab.restricted_context) if who == "lab-restricted" else narrow
    before = lab.kubectl("get", "crd", "-o", "name").stdout
    crds = len(before.split())
    app = build_app(kubeconfig, context, record=None, layout="grid",
                    settings=Settings(loader=LoaderSettings(source="synthetic:5", rate=50.0)))
    async with app.run_test(size=(200, 60)):
        screen = app.monitor_screen
        probes = ("inventory", "discovery", "throttling", "openapi", "health", "latency")
        await async_wait_for(lambda: all(app.store.last_good(p) for p in probes), timeout=120,
                             message="a sample of every probe")
        await start_loader_as_configured(app)
        loader = screen.panel(LoaderPanel)
        await async_wait_for(lambda: REFUSED_LOAD in " ".join(widget_text(loader).split()), timeout=60,
                             message="the loader refusing with the permission named")
        group_versions = len(lab.kubectl("api-versions").stdout.split())

        def shows(cls, *words: str):
            return lambda: all(w in " ".join(widget_text(screen.panel(cls)).split()) for w in words)

        # What every such user may see: CRDs and discovery as kubectl counts them, OpenAPI.
        await async_wait_for(shows(InventoryPanel, f"CRDs {crds}"), timeout=30, message="inventory's count")
        await async_wait_for(shows(DiscoveryPanel, f"aggregated {group_versions} GVs"), timeout=30,
                             message=f"discovery's {group_versions} group-versions")
        await async_wait_for(shows(OpenAPIPanel, "v3 paths"), timeout=30, message="the OpenAPI panel")
        if who == "lab-restricted":  # the monitor role reads /metrics: figures, no refusal anywhere
            await async_wait_for(shows(HealthPanel, "goroutines"), timeout=30, message="health figures")
            await async_wait_for(shows(ThrottlingPanel, "429s to crdscope"), timeout=30, message="throttling")
            assert "RSS —" not in widget_text(screen.panel(HealthPanel))
        else:  # /metrics and the flowcontrol API are forbidden: each panel names the refusal
            await async_wait_for(shows(HealthPanel, "RSS —", FORBIDDEN_METRICS), timeout=30,
                                 message="health naming the 403")
            await async_wait_for(shows(ThrottlingPanel, FORBIDDEN_METRICS, 'cannot list resource "flowschemas"'),
                                 timeout=30, message="throttling naming the 403s")
        text = {cls: widget_text(screen.panel(cls)) for cls in
                (InventoryPanel, DiscoveryPanel, ThrottlingPanel, OpenAPIPanel, HealthPanel, LoaderPanel)}
    if who == "lab-restricted":
        # No refusal (a bare "403" would also match a figure: "heap 403MiB" made this flaky).
        shown = text[HealthPanel] + text[ThrottlingPanel]
        assert FORBIDDEN_METRICS not in shown and "cannot list resource" not in shown, shown
        assert "forbidden" not in shown.lower(), shown
    assert "Traceback" not in "".join(text.values())
    assert lab.kubectl("get", "crd", "-o", "name").stdout == before  # the refused start changed nothing


def test_load_and_clean_name_the_missing_permission_and_change_nothing(lab, narrow):
    kubeconfig, context = narrow
    before = lab.kubectl("get", "crd", "-o", "json")
    names = sorted(i["metadata"]["name"] + i["metadata"]["resourceVersion"] for i in json.loads(before.stdout)["items"])
    loaded = crdscope("load", "synthetic:5", "--seed", "9401", "--kubeconfig", kubeconfig, "--context", context)
    assert loaded.returncode == 3 and "Traceback" not in loaded.stderr
    assert f"user '{NARROW}' of context '{NARROW}' {REFUSED_LOAD}" in loaded.stderr
    assert "nothing was changed" in loaded.stderr
    cleaned = crdscope("clean", "--yes", "--kubeconfig", kubeconfig, "--context", context)
    assert cleaned.returncode == 3 and "Traceback" not in cleaned.stderr
    assert "may not delete customresourcedefinitions.apiextensions.k8s.io" in cleaned.stderr
    after = json.loads(lab.kubectl("get", "crd", "-o", "json").stdout)["items"]
    assert sorted(i["metadata"]["name"] + i["metadata"]["resourceVersion"] for i in after) == names
