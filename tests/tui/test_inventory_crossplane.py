"""The inventory panel with a Crossplane install chain (Pilot): each Provider's row, its package, a runtime
without a kubelet said as a state, the MRAPs; and nothing of it where Crossplane is absent."""

from __future__ import annotations

import dataclasses
import time

from crdscope.base.crossplane import CrossplaneObjects
from crdscope.connection.crossplane_read import parse_mrap, parse_mrd_table, parse_provider, parse_revision
from crdscope.probes.inventory import with_crossplane
from crdscope.base.samples.inventory import InventorySample
from crdscope.tui.app import CrdscopeApp
from crdscope.tui.panels.inventory import InventoryPanel
from tests.helpers import async_wait_for
from tests.tui.conftest import ListFeed, shown, widget_text
from tests.unit.test_crossplane_chain import family, records


def chain_sample(now: float) -> InventorySample:
    crds, lists = family()
    objects = CrossplaneObjects(
        providers=tuple(parse_provider(p) for p in lists["providers"]),
        revisions=tuple(parse_revision(r) for r in lists["providerrevisions"]),
        mrds=tuple(parse_mrd_table(lists["managedresourcedefinitions"])), mrds_version="v1alpha1",
        mraps=tuple(parse_mrap(m) for m in lists["managedresourceactivationpolicies"]),
        has_nodes=False, read_at=now - 12, present=True)
    return dataclasses.replace(with_crossplane(list(records(crds).values()), now, objects), watch_connected=True)


async def show_inventory(samples: list, size: tuple[int, int]) -> tuple[str, bool]:
    """The inventory panel's text, and whether its Crossplane block is displayed."""
    clock = max(s.timestamp for s in samples) + 2.0
    app = CrdscopeApp(ListFeed(samples), clock=lambda: clock)
    async with app.run_test(size=size) as pilot:
        await async_wait_for(lambda: app.store.version >= len(samples), timeout=10, message="samples in the store")
        panel = shown(app.monitor_screen, InventoryPanel)
        await pilot.pause()
        panel.redraw()
        await pilot.pause()
        return widget_text(panel), panel.query_one("#inventory-crossplane").display


async def test_the_chain_is_on_the_inventory_panel_at_80_columns():
    text, displayed = await show_inventory([chain_sample(time.time())], (80, 24))
    assert displayed
    lines = text.splitlines()
    assert "Crossplane (read 14s ago)" in lines
    header = next(line for line in lines if line.startswith("provider"))
    assert header.split() == ["provider", "rev", "MRDs", "a/i", "CRDs", "e/x", "rate", "ETA", "runtime"]
    row = lines[lines.index(header) + 1]
    # Provider, active revision (and one more), MRDs Active/Inactive, CRDs Established/expected, runtime.
    assert row.split()[:5] == ["aws-s3", "r2", "+1", "2/2", "1/2"] and row.endswith("no pods (no kubelet)")
    assert lines[lines.index(header) + 2].strip() == "registry.test/aws-s3:v2"
    assert any(line.startswith("MRAP s3 bucket*.s3.aws.test, policys.* → activated 2") for line in lines)
    # Server-supplied brackets are shown as they are, never taken for markup.
    assert any(line.startswith("MRAP grants grant[s]\\.s3.aws.test, [bad → activated 0 · 1 matching still Inactive")
               for line in lines)
    assert "1 MRDs not listed by any revision (yet)" in lines
    # No Node: said once for every runtime, under the table.
    assert any(line.startswith("runtimes: no Node: no kubelet runs provider pods here (1 that should run")
               for line in lines)
    table = lines[lines.index(header): lines.index(header) + 3]  # free text (MRAP lines) may wrap, rows do not
    assert all(len(line) <= 78 for line in table), table
    assert "unhealthy" not in text  # a Deployment no kubelet will run is not a fault


async def test_no_crossplane_no_block():
    plain = InventorySample(crds=3, established=3, by_state={"Established": 3}, by_owner={"other": 3},
                            watch_connected=True)
    text, displayed = await show_inventory([plain], (80, 24))
    assert not displayed and "provider" not in text and "MRAP" not in text


async def test_the_activation_line_shows_what_compositions_need_and_the_plan():
    from tests.unit.test_activation import composition, pt

    from crdscope.base.activation import read_composition

    sample = chain_sample(time.time())
    crds, lists = family()
    objects = CrossplaneObjects(
        providers=tuple(parse_provider(p) for p in lists["providers"]),
        revisions=tuple(parse_revision(r) for r in lists["providerrevisions"]),
        mrds=tuple(parse_mrd_table(lists["managedresourcedefinitions"])), mrds_version="v1alpha1",
        mraps=tuple(parse_mrap(m) for m in lists["managedresourceactivationpolicies"]), has_nodes=False,
        read_at=sample.timestamp - 12, present=True,
        compositions=(read_composition(composition(pt(("s3.aws.test/v1", "Bucket"), ("s3.aws.test/v1", "Grant")))),))
    composed = dataclasses.replace(with_crossplane(list(records(crds).values()), sample.timestamp, objects),
                                   watch_connected=True)
    text, displayed = await show_inventory([composed], (120, 40))
    flat = " ".join(text.split())
    assert displayed
    assert "Activation (1 Compositions): needed 2 · active 1 · inactive 1" in flat
    assert "composed but not active: grants.s3.aws.test" in flat
    assert "MRAP entries matching nothing: grants: [bad" in flat
    assert "plan: 2 entries (buckets.s3.aws.test, grants.s3.aws.test)" in flat
