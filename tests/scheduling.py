"""How `make test` shares two workers (pytest-xdist, ``--dist loadgroup``) without tests disturbing each other.

Only when the suite runs under xdist (``-n``); a plain ``pytest`` run (``make soak``, one file) is untouched.

* **A module is one unit of work** in ``e2e/``, ``faults/`` and ``tui/``: its module-scoped fixtures (a lab
  of its own, Crossplane, Prometheus) start once, on one worker, and its tests keep their order. Unit
  tests are handed out one by one. Session fixtures are per worker: each worker has its own shared lab.
* **The longest modules start first** (:data:`LONGEST_FIRST`, from ``--durations``), so that the two workers
  end together rather than one finishing a 20-minute module alone; the rest keep file order.
* **A test marked ``alone``** measures what a neighbour's CPU would change (a key's latency, a deadline in
  seconds): it runs while no other test runs on any worker (a reader-writer lock on files of the run), and
  it is handed out last, as a unit of its own, so that the other worker waits only for a short test to end.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

#: Module groups: the tests of one of these folders' files go to one worker together.
GROUPED_FOLDERS = ("tests/e2e/", "tests/faults/", "tests/tui/")

#: The longest modules (their tests' seconds added up, from a run with --durations=0), started first.
#: A module not named here starts in file order after these; keep the list in order, longest first.
#: Seconds of the loaded single-process baseline (2026-12-07); test_loader, test_footprint,
#: test_findings_doctor and test_discovery less what unpacking the shared archives (xz read out of
#: order, pure-Python YAML) and deleting CRDs one request each cost there (tests/crdsets.py).
LONGEST_FIRST = (
    "tests/e2e/test_plain_clone.py",  # 1,360
    "tests/e2e/test_crossplane.py",  # 709
    "tests/e2e/test_attribution.py",  # 504 alone under the e2e lock (real Crossplane, three stages)
    "tests/e2e/test_crashloop.py",  # 379, and the OOM remedy applied: 158-224 alone
    "tests/e2e/test_loader.py",  # 491 -> about 355 (188 alone under the e2e lock)
    "tests/e2e/test_bench_smoke.py",  # 340
    "tests/e2e/test_view.py",  # 210
    "tests/e2e/test_mrap.py",  # 200
    "tests/e2e/test_crossplane_remedies.py",  # 118 alone
    "tests/e2e/test_footprint.py",  # 213 -> about 157
    "tests/e2e/test_findings_doctor.py",  # 217 -> about 137
    "tests/tui/test_live.py",  # 133
    "tests/e2e/test_ha.py",  # 111
    "tests/e2e/test_fail_if_down.py",  # 101
    "tests/e2e/test_latency_slo.py",  # 76 alone
    "tests/e2e/test_private_registry.py",  # 70 alone
    "tests/e2e/test_versions.py",  # 97
    "tests/e2e/test_report_browser.py",  # 94
    "tests/e2e/test_discovery.py",  # 101 -> about 93
)

_LOCK = pytest.StashKey["RunLock"]()


class RunLock:
    """Shared for ordinary tests, exclusive for ``alone`` ones, between the workers of one run.

    A turnstile (taken by a test that wants to be alone while it waits) keeps new ordinary tests from
    slipping in ahead of it: flock grants a shared lock even while an exclusive one is waited for.
    """

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._turnstile: IO[bytes] = open(directory / "turnstile.lock", "ab")
        self._room: IO[bytes] = open(directory / "room.lock", "ab")

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        fcntl.flock(self._room, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(self._room, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def alone(self) -> Iterator[None]:
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._room, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._room, fcntl.LOCK_UN)
        finally:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    if is_worker(config):
        # Each worker's base temp is a folder of the run's own (pytest keeps the last three runs).
        config.stash[_LOCK] = RunLock(Path(config.option.basetemp).parent / "scheduling")


def module_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist: group the modules of GROUPED_FOLDERS, longest first, ``alone`` tests last."""
    if not is_worker(config):
        return
    modules = list(dict.fromkeys(module_of(item) for item in items))

    def rank(item: pytest.Item) -> tuple[int, int]:
        module = module_of(item)
        if item.get_closest_marker("alone"):
            return 2, modules.index(module)
        if module in LONGEST_FIRST:
            return 0, LONGEST_FIRST.index(module)
        return 1, modules.index(module)

    for item in items:
        module = module_of(item)
        if module.startswith(GROUPED_FOLDERS) and not item.get_closest_marker("xdist_group"):
            # The group's name ends each node id under xdist ("...::test_x@e2e/test_view"): kept short.
            # An `alone` test is a unit of its own, handed out last (its module's fixtures start again).
            group = module.removeprefix("tests/").removesuffix(".py")
            item.add_marker(pytest.mark.xdist_group(f"{group}:alone" if item.get_closest_marker("alone") else group))
    items.sort(key=rank)  # stable: a module's tests keep their order


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Outside pytest-timeout's timer: waiting for the other worker is not the test's own time."""
    lock = item.config.stash.get(_LOCK, None)
    if lock is None:
        yield
        return
    with lock.alone() if item.get_closest_marker("alone") else lock.shared():
        yield
