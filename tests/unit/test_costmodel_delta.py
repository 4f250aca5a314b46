"""A release priced against the one a cluster runs (issue 47 item 7): the delta's arithmetic, by hand.

The coefficients are the test's own (``tests/unit/test_costmodel.py``: resident memory 2 MiB a CRD,
1 MiB a served version, 10 bytes a schema byte, +-25%; OpenAPI v2 one byte a schema byte; install
0.1 s a CRD), so every expected figure below is arithmetic on the CRDs the test writes; the one
discovery size is the entry a real kube-apiserver 1.37 wrote (``REAL_GROUP_ENTRY``).
"""

from __future__ import annotations

import copy
import json

import pytest

from crdscope.base.activation import MRD, Policy
from crdscope.costmodel.delta import BY_GROUPS, BY_NAMES, diff, installed_of
from crdscope.costmodel.features import features_of_spec
from crdscope.costmodel.model import Interval, Target, estimate
from crdscope.costmodel.planner import Platform
from crdscope.costmodel.report import to_json, to_table
from crdscope.costmodel.upgrade import ACTIVE, INACTIVE, price_upgrade, states_after, upgraded
from tests.unit.test_costmodel import REAL_GROUP_ENTRY, SCHEMA, spec, write_coefficients

MIB = float(1 << 20)
REAL_GROUP = "ml.synthetic.crdscope.dev"


@pytest.fixture(autouse=True)
def coefficients(tmp_path, monkeypatch):
    """The test's own coefficients for every minor the model is asked about."""
    from crdscope.costmodel import coefficients as coefficients_module

    path = write_coefficients(tmp_path / "coefficients.json")
    monkeypatch.setattr(coefficients_module, "COEFFICIENTS_FILE", path)
    monkeypatch.setattr(coefficients_module.for_minor, "__defaults__", (path,))


def crd(name: str, group: str = "g.example", kind: str = "", schema: dict | None = None, **changes):
    """A CRD's features from a spec the test writes (``schema`` replaces every version's)."""
    written = spec(("v1",), group=group, kind=kind or name.split(".")[0].capitalize().rstrip("s"))
    if schema is not None:
        for version in written["versions"]:
            version["schema"] = {"openAPIV3Schema": schema}
    written.update(changes)
    return features_of_spec(name, written)


def grown_schema() -> dict:
    bigger = copy.deepcopy(SCHEMA)
    bigger["properties"]["spec"]["properties"]["region"] = {"type": "string", "description": "where it runs"}
    return bigger


def compact(value: object) -> int:
    return len(json.dumps(value, separators=(",", ":")))


def cluster_of(*crds, rss: float = 500 * MIB, extra_groups=("apps",), extra_gvs=("apps/v1",)) -> Target:
    """A cluster that serves ``crds`` beside other groups."""
    return Target(rss_bytes=rss, crds=len(crds) + 10,
                  group_versions=frozenset({gv for c in crds for gv in c.group_versions} | set(extra_gvs)),
                  groups=frozenset({c.group for c in crds} | set(extra_groups)))


# --------------------------------------------------------------------------- which CRDs, compared


def test_the_diff_sorts_each_crd_by_name_and_cost_drivers():
    same, grown, gone, new = crd("as.g.example"), crd("bs.g.example"), crd("cs.g.example"), crd("ds.g.example")
    # Printer columns, the storage version and the conversion strategy cost nothing the model counts.
    restyled = features_of_spec("as.g.example", {**spec(("v1",), group="g.example", kind="A"),
                                                 "conversion": {"strategy": "Webhook"}})
    delta = diff([same, grown, gone], [restyled, crd("bs.g.example", schema=grown_schema()), new])
    assert [c.name for c in delta.added] == ["ds.g.example"]
    assert [c.name for c in delta.removed] == ["cs.g.example"]
    assert [(old.name, new.schema_bytes - old.schema_bytes) for old, new in delta.changed] == \
        [("bs.g.example", compact(grown_schema()) - compact(SCHEMA))]
    assert [c.name for c in delta.unchanged] == ["as.g.example"]
    assert {c.name for c in delta.installed} == {"as.g.example", "bs.g.example", "cs.g.example"}
    assert delta.schema_bytes_added == compact(grown_schema()) - compact(SCHEMA)  # + new's - gone's: equal sizes


def test_the_installed_release_is_the_clusters_crds_of_the_sources_groups_or_names():
    cluster = [crd("as.g.example"), crd("bs.g.example"), crd("xs.other.example", group="other.example")]
    by_groups = installed_of(cluster, {"g.example"}, {"as.g.example"}, BY_GROUPS)
    assert [c.name for c in by_groups] == ["as.g.example", "bs.g.example"]
    by_names = installed_of(cluster, {"g.example"}, {"as.g.example"}, BY_NAMES)
    assert [c.name for c in by_names] == ["as.g.example"]


# --------------------------------------------------------------------------- what the delta costs


def test_a_release_the_cluster_runs_already_costs_nothing_new():
    release = [crd(f"k{i}s.g.example", kind=f"K{i}") for i in range(4)]
    result = estimate(release, "1.37", target=cluster_of(*release), installed=release)
    zero = Interval(0.0, 0.0, 0.0)
    assert (result.memory_bytes, result.heap_bytes, result.openapi_v2_bytes_added, result.install_seconds) == \
        (zero, zero, zero, zero)
    assert (result.crds_added, result.crds_removed, result.crds_changed, result.crds_unchanged) == (0, 0, 0, 4)
    assert (result.groups_added, result.group_versions_added, result.resources_added) == (0, 0, 0)
    assert result.aggregated_bytes_added == 0 and result.legacy_requests_added == 0
    assert result.legacy_requests_after == 2 + 23 + 0  # the calibration's 23 group-versions stand for the cluster's
    assert result.rss_after_bytes.value == pytest.approx(500 * MIB)
    assert result.crds == 4  # SOURCE's own figures stay SOURCE's


def test_a_larger_schema_costs_its_difference_and_a_smaller_one_frees_it():
    old, new = crd("as.g.example"), crd("as.g.example", schema=grown_schema())
    grew = compact(grown_schema()) - compact(SCHEMA)
    result = estimate([new], "1.37", target=cluster_of(old), installed=[old])
    assert result.crds_changed == 1 and result.crds_added == 0
    assert result.memory_bytes.value == pytest.approx(10.0 * grew)
    assert (result.memory_bytes.low, result.memory_bytes.high) == pytest.approx((7.5 * grew, 12.5 * grew))
    assert result.heap_bytes.value == 0  # the heap's only term is per CRD: the same CRD, none more
    assert result.openapi_v2_bytes_added.value == pytest.approx(grew)
    assert result.install_seconds.value == pytest.approx(0.1)  # one CRD written again
    assert result.group_versions_added == 0 and result.resources_added == 0

    shrunk = estimate([old], "1.37", target=cluster_of(new), installed=[new])
    assert shrunk.memory_bytes.value == pytest.approx(-10.0 * grew)
    # Below zero as a positive figure's is above: -25% to +25% of its size, the low bound the larger saving.
    assert (shrunk.memory_bytes.low, shrunk.memory_bytes.high) == pytest.approx((-12.5 * grew, -7.5 * grew))
    assert shrunk.rss_after_bytes.value == pytest.approx(500 * MIB - 10.0 * grew)


def test_a_removed_crd_frees_its_memory_and_its_discovery_entry():
    gone = features_of_spec(f"storesubnets.{REAL_GROUP}", spec(("v1beta1",), group=REAL_GROUP))
    kept = crd("as.g.example")
    result = estimate([kept], "1.37", target=cluster_of(gone, kept), installed=[gone, kept])
    held = 2 * MIB + 1 * MIB + 10.0 * gone.schema_bytes
    assert result.memory_bytes.value == pytest.approx(-held)
    assert result.rss_after_bytes.value == pytest.approx(500 * MIB - held)
    assert (result.crds_removed, result.crds_unchanged, result.crds_added) == (1, 1, 0)
    assert (result.groups_removed, result.group_versions_removed, result.resources_removed) == (1, 1, 1)
    assert result.openapi_v3_paths_removed == 1 and result.legacy_requests_added == -1
    # Its group's whole entry, as the real server wrote it, and the comma before it.
    assert result.aggregated_bytes_added == -(len(REAL_GROUP_ENTRY) + 1)
    assert result.install_seconds == Interval(0.0, 0.0, 0.0)  # nothing is written


def test_without_an_installed_release_every_crd_is_added_as_before():
    release = [crd(f"k{i}s.g.example", kind=f"K{i}") for i in range(3)]
    alone = estimate(release, "1.37")
    assert alone.delta is None and (alone.crds_added, alone.crds_removed) == (3, 0)
    compared = estimate(release, "1.37", installed=())  # compared with a cluster that runs none of it
    assert compared.memory_bytes == alone.memory_bytes and compared.crds_added == 3
    assert compared.group_versions_added == alone.group_versions_added == 1


def test_the_report_names_the_delta():
    old, new, gone = crd("as.g.example"), crd("as.g.example", schema=grown_schema()), crd("cs.g.example")
    result = estimate([new, crd("ds.g.example")], "1.37", target=cluster_of(old, gone), installed=[old, gone])
    data = to_json(result, source="release.yaml")
    assert (data["installed_crds"], data["crds_added"], data["crds_removed"], data["crds_changed"]) == (2, 1, 1, 1)
    assert data["delta"]["added"] == ["ds.g.example"] and data["delta"]["removed"] == ["cs.g.example"]
    [changed] = data["delta"]["changed"]
    assert changed["schema_bytes_after"] - changed["schema_bytes_before"] == compact(grown_schema()) - compact(SCHEMA)
    assert "group_versions_removed" in data["discovery"] and "v3_paths_removed" in data["openapi"]
    assert "2 CRDs there: adds 1, removes 1, changes 1, leaves 0 as they are" in to_table(result, source="r")


def test_a_negative_interval_stays_below_zero():
    assert Interval.signed(-100.0, 0.25) == Interval(-100.0, -125.0, -75.0)
    assert Interval.signed(-100.0, 1.5) == Interval(-100.0, -250.0, 0.0)
    assert Interval.signed(100.0, 0.25) == Interval.around(100.0, 0.25)


# --------------------------------------------------------------------------- mrap: MRDs in an upgrade


def platform(mrds, policies=(), features=None, described="x") -> Platform:
    return Platform((), tuple(mrds), tuple(policies), (), objects_known=True, described=described,
                    features=features or {})


def test_an_upgrade_counts_active_mrds_as_crds_and_every_mrd_apart():
    """The cluster: as, cs Active (CRDs there), bs Inactive, zs of another group; its MRAP names as, cs and es.
    The release (safe-start: all Inactive in its files but fs, from a package without safe-start) drops cs and
    brings ds, es and fs."""
    cluster = platform([MRD("as.g.example", ACTIVE), MRD("bs.g.example", INACTIVE), MRD("cs.g.example", ACTIVE),
                        MRD("zs.h.example", ACTIVE)],
                       [Policy("mine", ("as.g.example", "cs.g.example", "es.g.example"))])
    features = {name: crd(name) for name in ("as.g.example", "bs.g.example", "ds.g.example", "es.g.example",
                                             "fs.g.example")}
    release = platform([MRD(name, INACTIVE) for name in ("as.g.example", "bs.g.example", "ds.g.example",
                                                         "es.g.example")] + [MRD("fs.g.example", ACTIVE)],
                       features=features)
    installed = (crd("as.g.example"), crd("cs.g.example"))
    upgrade = price_upgrade(cluster, release, installed, cluster_of(*installed), "1.37")
    # as stays Active, bs stays Inactive (no MRAP names it), ds is new and unmatched, es matched, fs Active.
    assert upgrade.states == {"as.g.example": ACTIVE, "bs.g.example": INACTIVE, "ds.g.example": INACTIVE,
                              "es.g.example": ACTIVE, "fs.g.example": ACTIVE}
    assert upgrade.mrds_added == ("ds.g.example", "es.g.example", "fs.g.example")
    assert upgrade.mrds_removed == ("cs.g.example",) and upgrade.installed_mrds == 3
    assert upgrade.mrds_activated == ("es.g.example", "fs.g.example")
    assert upgrade.mrd_bytes_added == pytest.approx(2 * 0.8 * MIB)
    e = upgrade.estimate  # CRDs: as the same, es and fs new, cs gone
    assert (e.crds_added, e.crds_removed, e.crds_changed, e.crds_unchanged) == (2, 1, 0, 1)
    assert e.memory_bytes.value == pytest.approx(2 * MIB + 1 * MIB + 10.0 * crd("es.g.example").schema_bytes)

    after = upgraded(cluster, release, upgrade.states)
    assert {m.name: m.state for m in after.mrds} == {**upgrade.states, "zs.h.example": ACTIVE}


def test_an_mrd_whose_crd_the_cluster_has_stays_active():
    """A cluster that ran the provider before MRDs (Crossplane v1): its CRDs exist, no MRD names them."""
    cluster = platform([], [])
    release = platform([MRD("as.g.example", INACTIVE), MRD("bs.g.example", INACTIVE)])
    assert states_after(cluster, release, frozenset({"as.g.example"})) == {"as.g.example": ACTIVE,
                                                                            "bs.g.example": INACTIVE}
