"""``crdscope demo --replay`` (issue 48 item 5): a recorded demo told again on the compare screen.

Two kinds of recording: a small demo written here with the real recorder (two labs' health and
inventory samples, the capped one crossing 80% of its cap, OOM-killed and restarted, and the
narration's notes as the live demo writes them), whose story is known line by line; and the demo the
project ships (tui/data/fleet-demo/), played whole at full speed, its narration's figures checked
against the samples the monitor holds when each line is said.
"""

from __future__ import annotations

import re

import pytest

from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.inventory import InventorySample
from crdscope.base.samples.version import VersionSample
from crdscope.session.notes import CastMember, Note
from crdscope.session.recorder import ClusterInfo, Recorder
from crdscope.tui.fleet_replay import build_fleet_replay_app, read_demo, shipped_recordings
from crdscope.tui.format import number, size
from crdscope.tui.screens.compare import CompareScreen
from tests.helpers import async_wait_for

GIB = 2**30
CAP = 4 * GIB
T0 = 1_796_700_000.0
OLD, NEW = ("demo-126", "crdscope-lab-demo-126"), ("demo-137", "crdscope-lab-demo-137")


def health(t: float, rss: float, crds: int, *, restarts: int = 0, oom_kills: int = 0) -> HealthSample:
    return HealthSample(timestamp=t, rss_bytes=int(rss), crds=crds, mib_per_crd=rss / 2**20 / max(crds, 1),
                        restarts=restarts, oom_kills=oom_kills)


def write_demo(directory, *, notes: bool = True):
    """A recorded demo of 100 s: 1.26 (capped at 4 GiB) grows 40 MiB a second from 1 GiB, passes 80% at
    t=57 s, is OOM-killed at t=80 s and restarted; 1.37 grows 20 MiB a second.  Notes as the live demo
    writes them, into the capped lab's recording."""
    cast = (CastMember(OLD[0], OLD[1], "1.26", CAP), CastMember(NEW[0], NEW[1], "1.37", 0))
    paths = []
    for index, (name, context) in enumerate((OLD, NEW)):
        path = directory / f"demo.{context}.jsonl"
        version = "v1.26.15" if index == 0 else "v1.37.2"
        with Recorder(path, ClusterInfo("https://127.0.0.1:6443", context, version)) as recorder:
            recorder.record(VersionSample(timestamp=T0, git_version=version, minor=version.split(".")[1]))
            for second in range(0, 100, 2):
                t = T0 + second + 0.1 * index
                crds = 20 + 8 * second
                killed = index == 0 and second >= 80
                rss = (0.5 * GIB if killed else GIB + 40 * 2**20 * second) if index == 0 else GIB + 20 * 2**20 * second
                recorder.record(InventorySample(timestamp=t - 0.05, crds=crds, established=crds))
                recorder.record(health(t, rss, crds, restarts=1 if killed else 0, oom_kills=1 if killed else 0))
                if notes and index == 0 and second in (0, 10, 90):
                    said = {0: Note(t + 0.01, f"{name} (1.26, capped at 4.0GiB) beside demo-137 (1.37): watch ...",
                                    cast=cast),
                            10: Note(t + 0.01, f"{name}: 3/4 every member's Provider"),
                            90: Note(t + 0.01, "the end (demo-126 not installed, demo-137 installed): ...",
                                     kind="end")}[second]
                    recorder.record(said)
                    if second == 10:  # a line of figures, said live: replayed from the samples instead
                        recorder.record(Note(t + 0.02, "demo-126 at 12% of its cap", "warning", "figures"))
                    if second == 90:
                        recorder.record(Note(t + 0.02, "q quits and leaves both labs up", kind="live"))
        paths.append(path)
    return paths


async def test_the_replay_tells_the_story_in_order_from_both_recordings(tmp_path):
    paths = write_demo(tmp_path)
    app = build_fleet_replay_app(list(reversed(paths)), speed=0, layout="tabs")  # any order: the cast orders them
    async with app.run_test(size=(160, 50)):
        assert isinstance(app.screen, CompareScreen)
        await async_wait_for(lambda: app.replayed, timeout=30, message="the replay's end")
    said = app.narration
    old, new = app.sessions
    assert (old.name, new.name) == (OLD[1], NEW[1])
    assert old.core.samples == new.core.samples == 101  # both clusters played, every sample
    assert said[0].startswith("demo-126 (1.26, capped at 4.0GiB) beside demo-137") and said[1] == "demo-126: 3/4 every member's Provider"
    # Read again from the replayed samples, not the recording: 80% of 4 GiB is passed at t=58 s
    # (1 GiB + 40 MiB/s: 3,344 MiB, 82%).
    near = next(i for i, line in enumerate(said) if " of its cap with " in line)
    assert said[near].startswith(f"demo-126 at 82% of its cap with {number(20 + 8 * 58)} CRDs; demo-137 holds "), said
    killed = next(i for i, line in enumerate(said) if " was OOM-killed by its cgroup at its 4.0GiB cap" in line)
    end = said.index("the end (demo-126 not installed, demo-137 installed): ...")
    assert near < killed < end
    assert said[end + 1].startswith(f"findings of {OLD[0]}") and said[end + 2].startswith(f"findings of {NEW[0]}")
    assert said[-1].startswith("the recording ends here")
    assert "demo-126 at 12% of its cap" not in said and "q quits and leaves both labs up" not in said


async def test_a_speed_plays_the_recordings_on_one_clock(tmp_path):
    """At 25x the 100 s recorded take 4 s: both clusters' samples arrive in the order taken, the notes between."""
    import time

    paths = write_demo(tmp_path)
    app = build_fleet_replay_app(paths, speed=25, layout="tabs")
    order: list[tuple[str, float]] = []
    async with app.run_test(size=(160, 50)):
        for session in app.sessions:
            session.core.add_listener(lambda taken, name=session.name: order.append((name, taken.sample.timestamp)))
        started = time.monotonic()
        await async_wait_for(lambda: app.replayed, timeout=30, message="the replay's end")
        took = time.monotonic() - started
    assert 3.0 < took < 12.0, took
    times = [t for _, t in order]
    assert times == sorted(times) and {name for name, _ in order} == {OLD[1], NEW[1]}


def test_recordings_of_no_demo_or_missing_a_lab_are_one_line(tmp_path):
    from crdscope.base.errors import ConfigError

    (tmp_path / "plain").mkdir()
    with pytest.raises(ConfigError, match="no recording of `crdscope demo`"):
        read_demo(write_demo(tmp_path / "plain", notes=False))
    with pytest.raises(ConfigError, match="the demo's demo-137 has no recording"):
        read_demo(write_demo(tmp_path)[:1])


SHIPPED_FIGURES = re.compile(r"^(?P<lab>\S+) at (?P<pct>\d+)% of its cap with (?P<crds>[\d,]+) CRDs; "
                             r"(?P<other>\S+) holds (?P<other_crds>[\d,]+) CRDs in (?P<rss>\S+)"
                             r"(, (?P<mib>[\d.]+) MiB per CRD)?$")


async def replay_checking_figures(paths=None, *, timeout: float = 120) -> tuple[list[str], list[str]]:
    """Replay a recorded demo (default: the shipped one) at full speed; each line of figures is checked,
    when it is said, against the samples the monitor holds then: the capped lab's percentage of its cap
    and CRDs, the other lab's CRDs, RSS and MiB per CRD as its row shows them.  The narration and the
    lines checked."""
    app = build_fleet_replay_app(paths, speed=0, layout="tabs")
    checked: list[str] = []
    tell = app.narrator.say

    def checking(line, severity, kind):
        match = SHIPPED_FIGURES.match(line) or KILLED_FIGURES.match(line)
        if match:
            capped, other = app.sessions
            limit = app.narrator.pairs[0][0].memory_limit
            if "pct" in match.groupdict():
                rss = capped.store.last_good_of(HealthSample).rss_bytes
                assert int(match["pct"]) == round(100 * rss / limit), (line, rss, limit)
                assert match["crds"] == number(capped.store.last_good_of(InventorySample).crds), line
            else:
                assert match["cap"] == size(limit) and capped.store.last_good_of(HealthSample).oom_kills >= 1
            theirs = other.store.last_good_of(HealthSample)
            assert match["other_crds"] == number(other.store.last_good_of(InventorySample).crds), line
            assert match["rss"] == size(theirs.rss_bytes), line
            assert match["mib"] is None or match["mib"] == f"{theirs.mib_per_crd:.2f}", line
            checked.append(line)
        tell(line, severity, kind)

    app.narrator.say = checking
    async with app.run_test(size=(160, 50)):
        await async_wait_for(lambda: app.replayed, timeout=timeout, message="the recorded demo's end")
    return app.narration, checked


SHIPPED_FIGURES = re.compile(r"^(?P<lab>\S+) at (?P<pct>\d+)% of its cap with (?P<crds>[\d,]+) CRDs; "
                             r"(?P<other>\S+) holds (?P<other_crds>[\d,]+) CRDs in (?P<rss>\S+)"
                             r"(, (?P<mib>[\d.]+) MiB per CRD)?$")
KILLED_FIGURES = re.compile(r"^(?P<lab>\S+) was OOM-killed by its cgroup at its (?P<cap>\S+) cap .*; "
                            r"(?P<other>\S+) holds (?P<other_crds>[\d,]+) CRDs in (?P<rss>\S+)"
                            r"(, (?P<mib>[\d.]+) MiB per CRD)?$")


@pytest.mark.skipif(not shipped_recordings(), reason="the shipped demo recording is not in this tree")
async def test_the_shipped_demo_replays_its_story_with_the_monitors_own_figures():
    """The CI version of the plain-clone demo's check (tests/e2e/test_fleet_demo_plain_clone.py): the
    narration's arithmetic against the monitor's own figures, on the recording the project ships."""
    said, checked = await replay_checking_figures()
    near = next(i for i, line in enumerate(said) if SHIPPED_FIGURES.match(line))
    killed = next(i for i, line in enumerate(said) if KILLED_FIGURES.match(line))
    end = next(i for i, line in enumerate(said) if line.startswith("the end ("))
    assert near < killed < end and len(checked) == 2, said
    assert any("crash-looping, OOM-killed" in line for line in said[end:]), said[end:]
    assert said[-1].startswith("the recording ends here")
