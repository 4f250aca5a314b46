"""``crdscope load`` and ``crdscope clean``: the loader on the command line.

Both write to a cluster, so both print where before they do, and refuse a
cluster that is not a crdscope lab unless ``--context NAME`` names it
(:func:`loader.safety.check_target`).  ``load`` shows a progress bar on a
terminal (stderr), prints a summary (``--json``: one object on stdout), and
on Ctrl-C stops cleanly: applies in flight finish, the run record is closed,
and the same command finishes the run later.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from .main import cluster_options, registry_config_option, run_async
from .progress import LoadProgress, on_terminal

if TYPE_CHECKING:
    from crdscope.connection.cluster import Cluster
    from crdscope.connection.kubeconfig import ClusterConfig
    from crdscope.loader.documents import Source
    from crdscope.loader.engine import LoadEngine, ProgressCallback
    from crdscope.base.samples.loader import LoaderSample
    from crdscope.loader.safety import CleanPlan

#: Exit codes of ``crdscope load`` (README "Exit codes"); 2 and 3 are a bad configuration and an
#: unreachable or refusing cluster, as for every command.
EXIT_FAILED = 1  # an item failed: unreadable, invalid, rejected by the server, never Established
EXIT_SKIPPED = 4  # nothing failed, but names were skipped (taken by a CRD crdscope does not manage)
EXIT_STOPPED = 130  # stopped before it finished (as a shell reports SIGINT)


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
@cluster_options(many=True)
@registry_config_option
def load(source: str | None, rate: float | None, concurrency: int | None, limit: int | None, profile: str | None,
         schema_props: int | None, seed: int, from_context: str | None, new_run: bool, as_json: bool,
         kubeconfig: str | None, context: tuple[str, ...]) -> None:
    """Load CRDs from SOURCE: a directory, a .tar/.tar.gz/.tar.xz archive, a YAML file, '-' (stdin),
    a Crossplane package (.xpkg, or a reference REGISTRY/REPO:TAG or @sha256:DIGEST, pulled with the
    lab's crane, its dependencies with it) or synthetic:N (the default, from config.toml).

    Every CRD gets the label app.kubernetes.io/managed-by=crdscope and the run's id; a name that
    exists without that label is skipped, never taken over.  A cluster that is not a crdscope lab
    (the server of `crdscope lab up`, or a context named crdscope-lab* on a loopback address)
    needs --context NAME spelled out.  Loading the same source again finishes a stopped run.
    Several --context load the same source into each cluster at the same pace, side by side."""
    from crdscope.loader.sources import open_source
    from crdscope.base.settings import load_settings

    settings = load_settings().loader
    if source is None and from_context is None:
        source = settings.source
    props = settings.schema_props if schema_props is None else schema_props
    contexts: list[str | None] = list(dict.fromkeys(context)) or [None]
    if len(contexts) > 1 and source == "-":
        raise click.UsageError("standard input can be read once: load a file into several clusters")
    # One source per cluster (a source is read as it is loaded), opened before anything is written.
    sources = [open_source(source, seed=seed, schema_props=props, from_context=from_context, kubeconfig=kubeconfig)
               for _ in contexts]
    if rate is not None and profile == "burst":
        _say("crdscope: --rate does not apply to the burst profile (only --concurrency does)")
    configs = _writable_targets(kubeconfig, contexts, sources[0].spec)

    def engine(cluster: Cluster, chosen: Source, on_progress: ProgressCallback | None) -> LoadEngine:
        from crdscope.loader.engine import LoadEngine

        return LoadEngine(cluster, chosen, rate=rate if rate is not None else settings.rate,
                          concurrency=concurrency if concurrency is not None else settings.concurrency,
                          limit=limit, profile=profile or settings.profile, resume=not new_run,
                          on_progress=on_progress)

    # One bar for one cluster; for several, a line per cluster as each ends.
    results = run_async(_load_all(configs, sources, engine, bar=on_terminal() and len(configs) == 1))
    _report(configs, results, as_json)


def _writable_targets(kubeconfig: str | None, contexts: list[str | None], spec: str) -> list[ClusterConfig]:
    """Each context's cluster, checked as one crdscope may write to (loader.safety), said before any write."""
    from crdscope.connection.kubeconfig import load_config
    from crdscope.loader.safety import check_target

    configs = [load_config(kubeconfig, name) for name in contexts]
    for config, name in zip(configs, contexts, strict=True):
        check_target(config, name, "load")
        _say(f"loading {spec} into context {config.context} at {config.server}")
    return configs


async def _load_all(configs: list[ClusterConfig], sources: list[Source],
                    engine: Callable[[Cluster, Source, ProgressCallback | None], LoadEngine],
                    *, bar: bool) -> list[tuple[LoadEngine, LoaderSample]]:
    """Every cluster's load side by side, to its end; Ctrl-C stops them (twice: abandons the applies)."""
    import asyncio
    import signal

    from crdscope.connection.cluster import Cluster

    clusters = [Cluster(config) for config in configs]
    progress = LoadProgress() if bar else None
    engines = [engine(cluster, chosen, progress.show if progress else None)
               for cluster, chosen in zip(clusters, sources, strict=True)]
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()

    def interrupted() -> None:
        if any(each.stopping for each in engines) and task is not None:
            task.cancel()  # a second Ctrl-C: abandon the applies in flight
            return
        for each in engines:
            each.stop()
        _say("\nstopping: letting the applies in flight finish (Ctrl-C again to abandon them)")

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, interrupted)
    try:
        samples = list(await asyncio.gather(*(each.run() for each in engines)))
    except asyncio.CancelledError:  # abandoned by a second Ctrl-C: the records are closed anyway
        samples = [each.progress() for each in engines]
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        if progress:
            progress.close()
        for cluster in clusters:
            await cluster.aclose()
    return list(zip(engines, samples, strict=True))


def _report(configs: list[ClusterConfig], results: list[tuple[LoadEngine, LoaderSample]], as_json: bool) -> None:
    """Each run's summary, then the error that ended a run early, or the exit code of the worst outcome.

    A load refused before its run began (the cluster unreachable or refusing crdscope) has no summary
    to give, only its one-line error."""
    fleet = len(configs) > 1
    for config, (engine, sample) in zip(configs, results, strict=True):
        if engine.fatal is not None and not engine.run_id:
            continue
        if as_json:
            click.echo(json.dumps({"context": config.context, **sample.summary()} if fleet else sample.summary()))
        else:
            if fleet:
                click.echo(f"context {config.context}:")
            _print_summary(sample)
    for config, (engine, _sample) in zip(configs, results, strict=True):
        if engine.fatal is not None:
            raise engine.fatal.about(f"context {config.context}") if fleet else engine.fatal
    codes = [_exit_code(sample, config.context if fleet else "") for config, (_, sample) in
             zip(configs, results, strict=True)]
    if any(codes):
        # The worst outcome wins: stopped, then failed, then skipped.
        sys.exit(next(code for code in (EXIT_STOPPED, EXIT_FAILED, EXIT_SKIPPED) if code in codes))


def _exit_code(sample: LoaderSample, context: str) -> int:
    """A run's exit code (0 when done with nothing failed or skipped); says how to finish a stopped one."""
    if sample.state != "done":
        where = f" in context {context}" if context else ""
        _say(f"crdscope: load stopped with {sample.pending} CRDs left{where}; run the same command again "
             f"to finish run {sample.run_id}")
        return EXIT_STOPPED
    if sample.failed:
        return EXIT_FAILED
    if sample.skipped:
        return EXIT_SKIPPED
    return 0


def _print_summary(sample: LoaderSample) -> None:
    """The end of a load for people: counts aligned, then the names that did not make it."""
    from .output import pairs, table
    from crdscope.tui.format import duration, number

    resumed = f" ({number(sample.resumed)} finished by earlier attempts)" if sample.resumed else ""
    click.echo(f"run {sample.run_id}: {sample.state} in {duration(sample.elapsed_seconds)}{resumed}")
    figures = [
        ("requested", number(sample.requested)),
        ("created", number(sample.created)),
        ("updated", number(sample.updated)),
        ("Established", f"{number(sample.established)} ({sample.crds_per_second:.1f} per second)"),
        ("skipped", number(sample.skipped) + (" (name taken by a CRD crdscope does not manage, or repeated)"
                                               if sample.skipped else "")),
        ("failed", number(sample.failed)),
        ("pending", number(sample.pending)),
    ]
    rest = [f"{number(sample.sent)} applies sent",
            f"{duration(sample.limiter_waited_seconds)} waiting for the rate limit",
            f"{number(sample.retries_429)} retries after 429"]
    if sample.not_crds:
        rest.append(f"{number(sample.not_crds)} documents that are not CRDs ignored")
    lines = pairs(figures) + [f"  {'; '.join(rest)}"]
    for title, problems in (("skipped", sample.skips), ("failed", sample.failures)):
        if problems:
            lines += ["", f"{title}:", *table(["CRD", "why"], [[p.name, p.reason] for p in problems], limit=30,
                                              align="ll")]
    click.echo("\n".join(lines))


def _confirm(question: str) -> bool:
    """Ask on the terminal; no answer (end of input) means no."""
    try:
        return click.confirm(question, default=False, err=True)
    except click.Abort:
        return False


@click.command()
@click.option("--run", "run_id", default=None, metavar="ID", help="only the CRDs of this load run")
@click.option("--yes", is_flag=True, help="do not ask for confirmation")
@cluster_options
def clean(run_id: str | None, yes: bool, kubeconfig: str | None, context: str | None) -> None:
    """Delete the CRDs crdscope created (label app.kubernetes.io/managed-by=crdscope), and with
    them every object of their kinds; lists them and asks first."""
    from crdscope.loader.safety import check_permissions, check_target, execute_clean, plan_clean
    from crdscope.connection.cluster import Cluster
    from crdscope.connection.kubeconfig import load_config

    config = load_config(kubeconfig, context)
    check_target(config, context, "clean")
    _say(f"cleaning context {config.context} at {config.server}")

    async def main() -> int:
        import asyncio

        async with Cluster(config) as cluster:
            await check_permissions(cluster, ("list", "delete"), "clean")
            plan = await plan_clean(cluster, run_id)
            if not plan.items:
                which = f" of run {run_id}" if run_id else ""
                click.echo(f"nothing to clean: no CRD{which} carries crdscope's label")
                return 0
            click.echo(_clean_listing(plan))
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


def _clean_listing(plan: CleanPlan, detail_limit: int = 30) -> str:
    """What clean would delete, as a table: every CRD when few, else those with objects and a count."""
    from .output import table

    shown = [item for item in plan.items if len(plan.items) <= detail_limit or item.objects != 0]
    rows = [[item.name, "unknown" if item.objects is None else str(item.objects), item.run_id or "-",
             f"({item.objects_error})" if item.objects is None else ""] for item in shown]
    lines = table(["CRD", "objects", "run", ""], rows, limit=len(rows), align="lrll")
    rest = len(plan.items) - len(shown)
    if rest:
        groups = {item.group for item in plan.items if item not in shown}
        lines.append(f"  ... and {rest} more CRDs in {len(groups)} API groups, with no objects")
    return "\n".join(lines)
