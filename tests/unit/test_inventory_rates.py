"""Inventory arithmetic: rates over the window, "still installing", and when an ETA can be given."""

from __future__ import annotations

import pytest

from crdscope.connection.crdwatch import CRDRecord
from crdscope.probes.inventory import owner_install, summarize

NOW = 1000.0


def record(name: str, *, created: float, established: float | None, owner: str = "o",
           terminating: bool = False, names_accepted: bool = True, labels=()) -> CRDRecord:
    return CRDRecord(
        name=name, uid=f"uid-{name}", group="g.test", kind="K", plural=name, scope="Cluster",
        served_versions=("v1",), storage_version="v1", owner=owner, labels=labels, run_id=None,
        resource_version="1", created=created, names_accepted=created if names_accepted else None,
        established=established, terminating=terminating)


def test_expected_count_gives_an_eta_at_the_established_rate():
    # 6 created and Established in the last minute, 20 expected: 14 left at 6 per minute = 140 s.
    owned = [record(f"c{i}", created=NOW - 50 + i, established=NOW - 49 + i) for i in range(6)]
    progress = owner_install(owned, NOW, 60.0, expected=20)
    assert (progress.per_minute, progress.established_per_minute) == (6.0, 6.0)
    assert progress.eta_basis == "expected" and progress.eta_seconds == pytest.approx(140.0)


def test_backlog_eta_when_the_total_is_unknown():
    owned = [record(f"e{i}", created=NOW - 30, established=NOW - 20) for i in range(3)]
    owned += [record(f"p{i}", created=NOW - 5, established=None) for i in range(6)]
    progress = owner_install(owned, NOW, 60.0)
    # 6 waiting, 3 Established per minute: 2 minutes for what exists now.
    assert progress.backlog == 6 and progress.eta_basis == "backlog"
    assert progress.eta_seconds == pytest.approx(120.0)


def test_no_rate_no_eta():
    stalled = [record("s", created=NOW - 600, established=None)]
    progress = owner_install(stalled, NOW, 60.0)
    assert progress is not None and progress.eta_seconds is None and "none Established" in progress.eta_note
    done = [record("d", created=NOW - 10, established=NOW - 9)]
    progress = owner_install(done, NOW, 60.0)
    assert progress.eta_seconds is None and "unknown" in progress.eta_note
    assert owner_install([record("old", created=NOW - 600, established=NOW - 599)], NOW, 60.0) is None


def test_summary_counts():
    records = [
        record("a", created=NOW - 10, established=NOW - 9, owner="ProviderRevision/p"),
        record("b", created=NOW - 100, established=NOW - 99, owner="ProviderRevision/p"),
        record("c", created=NOW - 5, established=None, owner="other", names_accepted=False),
        record("d", created=NOW - 300, established=NOW - 299, owner="crdscope", terminating=True,
               labels=(("app.kubernetes.io/managed-by", "crdscope"),)),
    ]
    sample = summarize(records, NOW)
    assert sample.by_state == {"Established": 2, "NamesAccepted": 0, "Terminating": 1, "Pending": 1}
    assert sample.established == 3  # a Terminating CRD can still be Established
    assert list(sample.by_owner.items()) == [("ProviderRevision/p", 2), ("crdscope", 1), ("other", 1)]
    assert sample.per_minute == 2.0 and sample.crdscope_owned == 1
    assert set(sample.installing) == {"ProviderRevision/p", "other"}
    assert type(sample).from_json(sample.to_json()) == sample
