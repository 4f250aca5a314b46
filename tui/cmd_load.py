"""``crdscope load`` and ``crdscope clean``: the loader on the command line.

Both write to a cluster, so both print where before they do, and refuse a
cluster that is not a crdscope lab unless ``--context NAME`` names it
(:func:`loader.safety.check_target`).  ``load`` shows a progress bar on a
terminal (stderr), prints a summary (``--json``: one object on stdout), and
on Ctrl-C stops cleanly: applies in flight finish, the run record is closed,
and the same command finishes the run later.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import sys

import click

from .cli import cluster_options, run_async

#: Exit code of a load stopped before it finished (as a shell reports SIGINT).
EXIT_STOPPED = 130


def _say(message: str) -> None:
    click.echo(message, err=True)


@click.command()
@click.argument("source", required=False)
@click.option("--rate", type=float, default=None, help="CRDs per second (steady profile) [default: 20]")
@click.option("--concurrency", type=int, default=None, help="applies in flight at most [default: 8]")
@click.option("--limit", type=int, default=None, help="load at most N CRDs of the source")
@click.option("--profile", type=click.Choice(["steady", "burst"]), default=None,
              help="steady: an even drip at --rate; burst: everything at once, as a provider install")
@click.option("--schema-props", type=int, default=None, help="synthetic: properties in spec.forProvider [default: 40]")
@click.option("--seed", type=int, default=1, show_default=True, help="synthetic: the generator's seed")
@click.option("--from-context", default=None, metavar="CTX", help="load the CRDs of another kubeconfig context")
@click.option("--new-run", is_flag=True, help="start a new run even if a stopped run of this source could be finished")
@click.option("--json", "as_json", is_flag=True, help="print the summary as one JSON object")
@cluster_options
def load(source, rate, concurrency, limit, profile, schema_props, seed, from_context, new_run, as_json,
         kubeconfig, context) -> None:
    """Load CRDs from SOURCE: a directory, a .tar/.tar.gz/.tar.xz archive, a YAML file, '-' (stdin)
    or synthetic:N (the default, from config.toml).

    Every CRD gets the label app.kubernetes.io/managed-by=crdscope and the run's id; a name that
    exists without that label is skipped, never taken over.  A cluster that is not a crdscope lab
    (the server of `crdscope lab up`, or a context named crdscope-lab* on a loopback address)
    needs --context NAME spelled out.  Loading the same source again finishes a stopped run."""
    from crdscope.loader.engine import LoadEngine
    from crdscope.loader.safety import check_target
    from crdscope.loader.sources import open_source
    from crdscope.probes.cluster import Cluster, load_config
    from crdscope.probes.settings import load_settings

    settings = load_settings().loader
    if source is None and from_context is None:
        source = settings.source
    chosen = open_source(source, seed=seed, schema_props=settings.schema_props if schema_props is None else schema_props,
                         from_context=from_context, kubeconfig=kubeconfig)
    if rate is not None and profile == "burst":
        _say("crdscope: --rate does not apply to the burst profile (only --concurrency does)")
    config = load_config(kubeconfig, context)
    check_target(config, context, "load")
    _say(f"loading {chosen.spec} into context {config.context} at {config.server}")

    async def main():
        cluster = Cluster(config)
        bar = ProgressLine() if sys.stderr.isatty() else None
        engine = LoadEngine(cluster, chosen, rate=rate if rate is not None else settings.rate,
                            concurrency=concurrency if concurrency is not None else settings.concurrency,
                            limit=limit, profile=profile or settings.profile, resume=not new_run,
                            on_progress=bar.show if bar else None)
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()

        def interrupted() -> None:
            if engine.stopping:
                task.cancel()  # a second Ctrl-C: abandon the applies in flight
                return
            engine.stop()
            _say("\nstopping: letting the applies in flight finish (Ctrl-C again to abandon them)")

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, interrupted)
        try:
            sample = await engine.run()
        except asyncio.CancelledError:  # abandoned by a second Ctrl-C: the record is closed anyway
            sample = engine.progress()
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)
            if bar:
                bar.close()
            await cluster.aclose()
        return engine, sample

    engine, sample = run_async(main())
    if as_json:
        click.echo(json.dumps(sample.summary()))
    else:
        _print_summary(sample)
    if engine.fatal is not None:
        raise engine.fatal
    if sample.state != "done":
        _say(f"crdscope: load stopped with {sample.pending} CRDs left; run the same command again "
             f"to finish run {sample.run_id}")
        sys.exit(EXIT_STOPPED)
    if sample.failed:
        sys.exit(1)


def _print_summary(sample) -> None:
    for problem in sample.skips:
        click.echo(f"skipped {problem.name}: {problem.reason}")
    for problem in sample.failures:
        click.echo(f"failed  {problem.name}: {problem.reason}")
    resumed = f" ({sample.resumed} by earlier attempts)" if sample.resumed else ""
    click.echo(f"run {sample.run_id}: {sample.state}. requested {sample.requested}, created {sample.created}, "
               f"updated {sample.updated}, Established {sample.established}{resumed}, skipped {sample.skipped}, "
               f"failed {sample.failed}, pending {sample.pending}")
    not_crds = f"; {sample.not_crds} documents that are not CRDs ignored" if sample.not_crds else ""
    click.echo(f"sent {sample.sent} in {sample.elapsed_seconds:.1f}s: {sample.crds_per_second:.1f} CRDs "
               f"Established per second; waited {sample.limiter_waited_seconds:.1f}s for the rate limit; "
               f"{sample.retries_429} retries after 429{not_crds}")


class ProgressLine:
    """A one-line progress bar on stderr, redrawn in place."""

    def __init__(self) -> None:
        self.width = 0

    def show(self, sample) -> None:
        columns = shutil.get_terminal_size((100, 20)).columns
        total = max(sample.requested, 1)
        done = sample.established + sample.skipped + sample.failed
        eta = "" if sample.eta_seconds is None else f" ETA {_duration(sample.eta_seconds)}"
        state = "" if sample.state == "running" else f" [{sample.state}]"
        text = (f" {done}/{sample.requested} · Established {sample.established} · sent {sample.sent} · "
                f"failed {sample.failed} · skipped {sample.skipped} · {sample.crds_per_second:.1f}/s{eta}{state}")
        bar_width = max(10, min(40, columns - len(text) - 3))
        filled = int(bar_width * min(done, total) / total)
        line = f"[{'#' * filled}{'.' * (bar_width - filled)}]{text}"[: columns - 1]
        sys.stderr.write("\r" + line.ljust(self.width))
        sys.stderr.flush()
        self.width = len(line)

    def close(self) -> None:
        if self.width:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _confirm(question: str) -> bool:
    """Ask on the terminal; no answer (end of input) means no."""
    try:
        return click.confirm(question, default=False, err=True)
    except click.Abort:
        return False


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


@click.command()
@click.option("--run", "run_id", default=None, metavar="ID", help="only the CRDs of this load run")
@click.option("--yes", is_flag=True, help="do not ask for confirmation")
@cluster_options
def clean(run_id, yes, kubeconfig, context) -> None:
    """Delete the CRDs crdscope created (label app.kubernetes.io/managed-by=crdscope), and with
    them every object of their kinds; lists them and asks first."""
    from crdscope.loader.safety import check_permissions, check_target, execute_clean, plan_clean
    from crdscope.probes.cluster import Cluster, load_config

    config = load_config(kubeconfig, context)
    check_target(config, context, "clean")
    _say(f"cleaning context {config.context} at {config.server}")

    async def main() -> int:
        async with Cluster(config) as cluster:
            await check_permissions(cluster, ("list", "delete"), "clean")
            plan = await plan_clean(cluster, run_id)
            if not plan.items:
                which = f" of run {run_id}" if run_id else ""
                click.echo(f"nothing to clean: no CRD{which} carries crdscope's label")
                return 0
            for line in plan.lines():
                click.echo(line)
            if not yes:
                agreed = await asyncio.to_thread(_confirm, plan.question)
                if not agreed:
                    click.echo("nothing deleted")
                    return 1
            else:
                _say(plan.question.replace("?", ": yes (--yes)"))
            result = await execute_clean(cluster, plan)
            for name, reason in result.refused:
                click.echo(f"not deleted {name}: {reason}")
            state = "gone" if result.gone else "deletion requested, not all gone yet"
            click.echo(f"deleted {len(result.deleted)} CRDs with {plan.objects} objects in "
                       f"{result.seconds:.1f}s ({state})")
            return 0 if result.gone and not result.refused else 1

    code = run_async(main())
    if code:
        sys.exit(code)
