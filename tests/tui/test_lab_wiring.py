"""The monitor opened on the lab reports the API server's etcd connections, as the headless watch does
(the TUI never wired the lab's counter: a lab session showed ``etcd_connections: null``)."""

from __future__ import annotations

import pytest

from crdscope.base.samples.health import HealthSample
from crdscope.tui.launch import build_app
from tests.helpers import async_wait_for

pytestmark = pytest.mark.lab


async def test_the_monitor_on_the_lab_counts_etcd_connections(lab):
    app = build_app(lab.kubeconfig, lab.admin_context, record=None, lab=lab.lab)
    async with app.run_test(size=(80, 24)):
        health = await async_wait_for(lambda: app.store.last_good_of(HealthSample), timeout=90,
                                      message="a health sample")
        # The API server holds at least one etcd client connection while it serves.
        assert health.etcd_connections is not None and health.etcd_connections >= 1, \
            health.unobservable.get("etcd_connections")
