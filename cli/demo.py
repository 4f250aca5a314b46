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
              help="record each cluster's session (replay it with `crdscope replay`)")
@registry_config_option
def demo(provider: str | None, memory_limit: str | None, crossplane: bool | None, prefix: str,
         record: bool) -> None:
    """The same provider into a 1.26 lab with a memory cap and a 1.37 lab, compared side by side.

    Starts both labs (named labs: they run beside any other; kept when already up from an earlier
    demo), opens the compare screen on them and installs the provider into both, through real
    Crossplane when it is built (else with crdscope's loader, said in one line), narrating what to
    look at: memory per CRD, the 1.26 lab nearing its cap, its OOM kill and restart. It ends with
    each cluster's open findings. `q` quits and leaves both labs up (`crdscope lab down --name
    PREFIX-126`, `... --name PREFIX-137` take them down).
    """
    from crdscope.cli.lab import check_lab_name
    from crdscope.cli.main import memory_limit_bytes
    from crdscope.tui.fleet_demo import open_fleet_demo

    check_lab_name(prefix)
    open_fleet_demo(provider, prefix=prefix, memory_limit=memory_limit_bytes(memory_limit), crossplane=crossplane,
                    record=record or None)
