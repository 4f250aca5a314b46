"""``crdscope demo``: the scaling limits side by side, in one command (registered lazily from ``cli/main.py``)."""

from __future__ import annotations

import click

from crdscope.cli.main import registry_config_option


@click.command("demo")
@click.option("--provider", default=None, metavar="SRC",
              help="the provider installed into both labs (anything `load` reads) "
                   "[default: ../shared/crds/provider-gcp.tar.xz, or where it is absent synthetic:800, "
                   "a family crdscope generates]")
@click.option("--memory-limit", default=None, metavar="SIZE",
              help="the 1.26 lab's memory cap, past which its API server is OOM-killed and restarted "
                   "[default: 4608Mi through Crossplane, 3584Mi with crdscope's loader]")
@click.option("--crossplane/--no-crossplane", "crossplane", default=None,
              help="install through each lab's real Crossplane (default: when built; `crdscope lab build "
                   "--crossplane` builds it) or with crdscope's loader")
@click.option("--name", "prefix", default="demo", show_default=True, metavar="PREFIX",
              help="the labs are named PREFIX-126 and PREFIX-137")
@click.option("--record/--no-record", default=True, show_default=True,
              help="record each cluster's session and the narration (replay them with `crdscope demo --replay "
                   "--recording FILE --recording FILE`, or one with `crdscope replay`)")
@click.option("--replay", is_flag=True,
              help="no lab and no build: play the demo recorded with crdscope (or the one --recording names), "
                   "its narration told again, on the compare screen")
@click.option("--speed", type=float, default=None, metavar="N",
              help="with --replay: how many times faster than it was recorded (0: as fast as it draws) [default: 30]")
@click.option("--recording", "recordings", multiple=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="with --replay: a recording of a demo of one's own (give each lab's: the demo says where it "
                   "recorded them when it quits)")
@registry_config_option
@click.pass_context
def demo(ctx: click.Context, provider: str | None, memory_limit: str | None, crossplane: bool | None, prefix: str,
         record: bool, replay: bool, speed: float | None, recordings: tuple[str, ...]) -> None:
    """The same provider into a 1.26 lab with a memory cap and a 1.37 lab, compared side by side.

    Starts both labs (named labs: they run beside any other; kept when already up from an earlier
    demo), opens the compare screen on them and installs the provider into both, through real
    Crossplane when it is built (else with crdscope's loader, said in one line), narrating what to
    look at: memory per CRD, the 1.26 lab nearing its cap, its OOM kill and restart. It ends with
    each cluster's open findings. `q` quits and leaves both labs up (`crdscope lab down --name
    PREFIX-126`, `... --name PREFIX-137` take them down).

    `--replay` plays a recorded demo instead, with its narration, at `--speed` times: no lab, no
    build, no Go (the one shipped with crdscope, about 15 minutes told in half a minute).
    """
    if replay or speed is not None or recordings:
        _replay(ctx, replay, speed, recordings)
        return
    from crdscope.cli.lab import check_lab_name
    from crdscope.cli.main import memory_limit_bytes
    from crdscope.tui.fleet_demo import open_fleet_demo

    check_lab_name(prefix)
    open_fleet_demo(provider, prefix=prefix, memory_limit=memory_limit_bytes(memory_limit), crossplane=crossplane,
                    record=record or None)


#: What only a live demo takes (``--replay`` plays what was recorded with them).
LIVE_ONLY = ("provider", "memory_limit", "crossplane", "prefix", "record")


def _replay(ctx: click.Context, replay: bool, speed: float | None, recordings: tuple[str, ...]) -> None:
    """``--replay``: the recorded demo, or a one-line error (exit 2) for flags that do not go with it."""
    from crdscope.base.errors import ConfigError

    if not replay:
        raise ConfigError("--speed and --recording are for --replay (a recorded demo)")
    given = [name for name in LIVE_ONLY if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]
    if given:
        flag = "--" + given[0].replace("_", "-").replace("prefix", "name")
        raise ConfigError(f"{flag} is for a live demo: --replay plays what was recorded")
    from crdscope.tui.fleet_replay import DEFAULT_SPEED, open_fleet_replay

    open_fleet_replay(list(recordings) or None, speed=DEFAULT_SPEED if speed is None else speed)
