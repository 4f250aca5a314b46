"""``crdscope estimate SOURCE``: what installing SOURCE would cost an API server, predicted (or measured).

Against an empty cluster of ``--kubernetes MINOR`` (no cluster needed: answers in
seconds) or a real one (``--context``, read-only).  ``--measure`` does it for real
on a fresh lab instead and prints predicted and measured side by side.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from crdscope.cli.main import cluster_options, memory_limit_bytes, memory_limit_option, registry_config_option

if TYPE_CHECKING:
    from pathlib import Path

    from crdscope.costmodel.features import CRDFeatures
    from crdscope.costmodel.model import Estimate, Target
    from crdscope.costmodel.mrds import MRDSelection
    from crdscope.costmodel.source import SourceCRDs
    from crdscope.lab.controlplane import LabState
    from crdscope.session.failif import Comparison


#: ``--help``'s example of a gate (and the one a malformed expression's error gives).
FAIL_IF_EXAMPLE = "memory.held_added_mib>500"
#: What gives a figure that is null without it (said when a --fail-if names one).
NULL_HINTS = {"installed_crds": "--context compares with what a cluster runs",
              "delta": "--context compares with what a cluster runs",
              "memory.limit_mib": "give --memory-limit or --prometheus",
              "memory.headroom_after_mib": "give --memory-limit or --prometheus",
              "memory.crds_until_limit": "give --memory-limit or --prometheus",
              "memory.held_added_mib": "the minor's calibration did not measure it",
              "memory.rss_before_mib": "/metrics was not readable",
              "crossplane_activation": "SOURCE is not a Crossplane provider",
              "install.seconds_after_mrap": "only --activate is priced as Crossplane activating MRDs",
              "install.seconds_at_loader_defaults": "--activate prices Crossplane's time: install.seconds_after_mrap"}


@click.command()
@click.argument("source", required=False)
@click.option("--kubernetes", "kubernetes_minor", default=None, metavar="MINOR",
              help="an empty cluster of this minor version, e.g. 1.37 [default: the newest calibrated]")
@memory_limit_option
@click.option("--prometheus", "prometheus_url", default=None, metavar="URL",
              help="read the API server container's memory limit from this Prometheus (when no --memory-limit)")
@click.option("--json", "as_json", is_flag=True, help="one JSON object (stable keys, units in names)")
@click.option("--format", "output_format", type=click.Choice(["table", "md"]), default="table", show_default=True,
              help="md: a footprint card to publish with a release")
@click.option("--measure", is_flag=True,
              help="install SOURCE on a fresh lab (with --context: that cluster's CRDs first; with --activate: "
                   "the MRDs through real Crossplane, then the MRAP), measure, print both, tear it down")
@click.option("--schema-props", type=int, default=40, show_default=True, help="synthetic: properties per schema")
@click.option("--seed", type=int, default=1, show_default=True, help="synthetic: the generator's seed")
@click.option("--from-context", default=None, metavar="CTX", help="SOURCE is the CRDs of another context")
@click.option("--activate", "activate", multiple=True, metavar="PATTERN",
              help="instead of SOURCE: the cluster's inactive Crossplane MRDs an MRAP with PATTERN would "
                   "activate (repeatable; read from the MRDs, nothing is activated)")
@click.option("--replaces", type=click.Choice(["groups", "names"]), default=None,
              help="with --context: the cluster's CRDs SOURCE replaces, those of its API groups (an upgrade: "
                   "the ones SOURCE lacks are removed) or only those of its names (nothing removed) "
                   "[default: groups]; the figures are the delta's")
@click.option("--fail-if", "fail_if", multiple=True, metavar="EXPR",
              help=f"exit 1 when a figure crosses EXPR (repeatable), e.g. '{FAIL_IF_EXAMPLE}', 'crds_added>200': "
                   "a key of --json, nested ones joined by dots (an interval compares by its value, .high by its "
                   "upper bound): crds_added, crds_removed, crds_changed, schema_bytes_added, memory.rss_added_mib, "
                   "memory.held_added_mib, memory.heap_added_mib, memory.headroom_after_mib, "
                   "discovery.group_versions_added, discovery.aggregated_bytes_added, "
                   "discovery.legacy_requests_after, openapi.v3_paths_added, openapi.v2_bytes_added, "
                   "install.seconds_at_loader_defaults (with --activate: install.seconds_after_mrap)")
@cluster_options
@registry_config_option
def estimate(source: str | None, kubernetes_minor: str | None, memory_limit: str | None,
             prometheus_url: str | None, as_json: bool,
             output_format: str, measure: bool, schema_props: int, seed: int, from_context: str | None,
             activate: tuple[str, ...], replaces: str | None, fail_if: tuple[str, ...], kubeconfig: str | None,
             context: str | None) -> None:
    """Predict what installing SOURCE costs: memory, discovery, OpenAPI, install time.

    SOURCE is anything `crdscope load` reads (a directory, an archive, YAML, `-`, synthetic:N,
    --from-context) or a Crossplane package (.xpkg, or REGISTRY/REPO:TAG, pulled with its dependencies).
    With --context the figures are the delta over the release the cluster runs (--replaces).
    """
    from crdscope.base.errors import ConfigError
    from crdscope.cli.gate import parse_gates

    gates = parse_gates(fail_if, FAIL_IF_EXAMPLE)
    if kubernetes_minor and context:
        raise ConfigError("give either --kubernetes (an empty cluster) or --context (a real one), not both")
    if gates and measure:
        raise ConfigError("--fail-if gates the prediction: it does not go with --measure")
    if replaces and (not context or activate):
        raise ConfigError("--replaces compares SOURCE with what a cluster runs: give --context (and no --activate)")
    limit = _memory_limit(memory_limit, prometheus_url)
    selection, read = _read(source, schema_props, seed, from_context, activate, kubernetes_minor, context,
                            kubeconfig)
    # --measure loads SOURCE on top of the context's CRDs: it removes nothing, so it prices by names.
    replaced = "names" if measure else (replaces or "groups")
    predicted, minor = _predict(read, kubernetes_minor, limit, context, kubeconfig,
                                replaces=replaced if context and selection is None else None,
                                on_cluster=bool(context) or selection is not None, activated=selection is not None)
    if measure and selection is not None:
        _measure_activation(selection, predicted, minor, as_json)
    elif measure:
        synthetic = read.spec.startswith("synthetic")
        arguments = ("--schema-props", str(schema_props), "--seed", str(seed)) if synthetic else ()
        _measure(source or "", arguments, predicted, minor, as_json,
                 replay=(context, kubeconfig) if context else None)
    else:
        _print_estimate(predicted, read, selection, gates, minor, as_json=as_json, output_format=output_format)


def _memory_limit(memory_limit: str | None, prometheus_url: str | None) -> float | None:
    """``--memory-limit``, else the container's limit from ``--prometheus``, else None."""
    given = memory_limit_bytes(memory_limit)
    if given:
        return float(given)
    if prometheus_url:
        import asyncio  # here, not at the top: `crdscope --help` imports this module

        return asyncio.run(_prometheus_limit(prometheus_url))
    return None


def _read(source: str | None, schema_props: int, seed: int, from_context: str | None, activate: tuple[str, ...],
          kubernetes_minor: str | None, context: str | None,
          kubeconfig: str | None) -> tuple[MRDSelection | None, SourceCRDs]:
    """SOURCE's CRDs, or with ``--activate`` the cluster's inactive MRDs the patterns select."""
    import asyncio

    from crdscope.base.errors import ConfigError
    from crdscope.costmodel.source import read_source

    selection = None
    if activate:
        if source or from_context or kubernetes_minor:
            raise ConfigError("--activate reads the cluster's MRDs: give no SOURCE, --from-context or --kubernetes "
                              "with it")
        selection, read = _inactive_mrds(activate, context, kubeconfig)
    else:
        read = asyncio.run(read_source(source, schema_props=schema_props, seed=seed, from_context=from_context,
                                       kubeconfig=kubeconfig))
    if not read.crds:
        reason = f": {read.problems[0].origin}: {read.problems[0].reason}" if read.problems else ""
        raise ConfigError(f"{read.spec}: no CustomResourceDefinition found{reason}")
    return selection, read


def _predict(read: SourceCRDs, kubernetes_minor: str | None, limit: float | None, context: str | None,
             kubeconfig: str | None, *, replaces: str | None, on_cluster: bool,
             activated: bool = False) -> tuple[Estimate, str]:
    """The estimate and the minor it is for: an empty cluster's, or (``on_cluster``: ``--context``, or
    ``--activate``'s cluster, default the current context) the cluster's, over the release it runs
    when ``replaces`` says which of its CRDs SOURCE replaces.  ``activated`` (``--activate``): the CRDs
    are priced as Crossplane creates them when an MRAP activates their MRDs."""
    import asyncio

    from crdscope.costmodel.coefficients import calibrated_minors
    from crdscope.costmodel.model import ACTIVATION, DIRECT
    from crdscope.costmodel.model import estimate as predict

    path = ACTIVATION if activated else DIRECT
    if not on_cluster:
        minor = kubernetes_minor or calibrated_minors()[-1]
        return predict(read.crds, minor, memory_limit_bytes=limit, path=path), minor
    minor, target, installed = asyncio.run(_read_cluster(context, kubeconfig, read, replaces))
    return predict(read.crds, minor, target=target, memory_limit_bytes=limit, installed=installed, path=path), minor


async def _read_cluster(context: str | None, kubeconfig: str | None, read: SourceCRDs,
                        replaces: str | None) -> tuple[str, Target, tuple[CRDFeatures, ...] | None]:
    """The cluster as a target, and the release SOURCE replaces (None: not asked), read together."""
    import asyncio

    from crdscope.costmodel.target import read_installed, read_target  # the connection stack only here

    if replaces is None:
        minor, target = await read_target(context, kubeconfig)
        return minor, target, None
    groups, names = {crd.group for crd in read.crds}, {crd.name for crd in read.crds}
    (minor, target), installed = await asyncio.gather(read_target(context, kubeconfig),
                                                      read_installed(context, kubeconfig, groups, names, replaces))
    return minor, target, installed


def _inactive_mrds(patterns: tuple[str, ...], context: str | None,
                   kubeconfig: str | None) -> tuple[MRDSelection, SourceCRDs]:
    """``--activate``: the cluster's inactive MRDs the patterns match, and their CRDs as a source read."""
    import asyncio

    from crdscope.base.errors import ConfigError
    from crdscope.costmodel.mrds import read_selection
    from crdscope.costmodel.source import SourceCRDs

    selection = asyncio.run(read_selection(patterns, context, kubeconfig))
    if not selection.crds:
        already = f" ({len(selection.already_active)} matching MRDs are Active already)" \
            if selection.already_active else ""
        raise ConfigError(f"no inactive MRD matches {' '.join(patterns)} among {selection.mrds_total}{already}")
    return selection, SourceCRDs(f"activate {' '.join(patterns)} ({len(selection.crds)} inactive MRDs)",
                                 selection.crds, ())


def _print_estimate(predicted: Estimate, read: SourceCRDs, selection: MRDSelection | None,
                    gates: tuple[Comparison, ...], minor: str, *, as_json: bool, output_format: str) -> None:
    """The prediction as JSON, Markdown or a table; what of the source could not be read, on stderr;
    then the gates (a name that is no figure: exit 2 before anything is printed; crossed: exit 1 after)."""
    from crdscope.cli.gate import enforce, gate_json, judge
    from crdscope.costmodel.coefficients import for_minor
    from crdscope.costmodel.crossplane import activation, is_crossplane_provider
    from crdscope.costmodel.model import crd_memory
    from crdscope.costmodel.report import to_json, to_markdown, to_table

    coefficients = for_minor(minor)
    found = (activation(read.crds, lambda crd: crd_memory(coefficients, crd))
             if is_crossplane_provider(read.crds) else None)
    data = to_json(predicted, source=read.spec, activation=found, problems=len(read.problems), packages=read.packages)
    if selection is not None:
        data["activate"] = {"patterns": list(selection.patterns), "mrds": list(selection.names),
                            "mrds_total": selection.mrds_total, "already_active": list(selection.already_active)}
    crossed = judge(gates, data, NULL_HINTS)
    if as_json:
        click.echo(json.dumps({**data, "fail_if": gate_json(gates, crossed)}, indent=1))
    elif output_format == "md":
        click.echo(to_markdown(predicted, source=read.spec, activation=found, packages=read.packages))
    else:
        click.echo(to_table(predicted, source=read.spec, activation=found, packages=read.packages))
    if read.problems:
        click.echo(f"estimate: {len(read.problems)} entries of {read.spec} could not be read and are left out "
                   f"(first: {read.problems[0].origin}: {read.problems[0].reason})", err=True)
    enforce(crossed)


async def _prometheus_limit(url: str) -> float | None:
    """The memory limit Prometheus shows for the API server container (None, said on stderr, if none)."""
    from crdscope.base.errors import ConfigError
    from crdscope.connection.prometheus import PrometheusSource

    source = PrometheusSource(url)
    try:
        reading = await source.read()
    finally:
        source.close()
    if reading.error:
        raise ConfigError(reading.error)
    limit = reading.values.get("memory_limit_bytes")
    if limit is None:
        click.echo(f"estimate: {reading.unobservable.get('memory_limit_bytes')}: no headroom figure", err=True)
        return None
    click.echo(f"estimate: memory limit {limit / 2**20:,.0f} MiB from {reading.sources['memory_limit_bytes']}",
               err=True)
    return limit


def _load_into(state: LabState, source: str, arguments: tuple[str, ...]) -> float:
    """``crdscope load SOURCE`` at its defaults into the lab; its wall seconds."""
    import subprocess
    import sys
    import time

    from crdscope.base.errors import CrdscopeError

    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "crdscope.cli.main", "load", source, *arguments, "--kubeconfig",
                           state.kubeconfig, "--context", "crdscope-lab", "--json", "--new-run"],
                          capture_output=True, text=True, timeout=7200)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise CrdscopeError(f"--measure: crdscope load exited {done.returncode}: {last}")
    return seconds


async def _export_crds(context: str, kubeconfig: str | None, directory: Path) -> int:
    """Write the CRDs of ``context`` into ``directory``, one file each (to replay them into a lab)."""
    from crdscope.loader.documents import CRDDocument
    from crdscope.loader.sources import ContextSource

    source = ContextSource(context, kubeconfig)
    await source.aprepare()
    count = 0
    async for item in source.aitems():
        if isinstance(item, CRDDocument):
            metadata = {key: item.metadata[key] for key in ("name", "labels", "annotations") if item.metadata.get(key)}
            document = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                        "metadata": {**metadata, "name": item.name}, "spec": json.loads(item.spec_json)}
            (directory / f"{count:05d}.json").write_text(json.dumps(document))
            count += 1
    return count


def _measure(source: str, arguments: tuple[str, ...], predicted: Estimate, minor: str, as_json: bool,
             replay: tuple[str, str | None] | None = None) -> None:
    """A fresh lab of ``minor``: (``replay``: the CRDs of that context first), figures, load SOURCE,
    figures again; print both columns."""
    import asyncio
    import tempfile
    from pathlib import Path

    from crdscope.costmodel.measure import compare, comparison_json, comparison_table, snapshot, wait_until_idle
    from crdscope.lab.binaries import ensure_binaries
    from crdscope.lab.controlplane import Lab, admin_tls
    from crdscope.lab.sockets import established_to_port

    binaries = ensure_binaries(kubernetes=minor, progress=lambda line: click.echo(line, err=True))
    with tempfile.TemporaryDirectory(prefix="crdscope-estimate-") as home:
        lab = Lab(Path(home))
        state = lab.up(binaries, say=lambda line: click.echo(line, err=True))
        try:
            apiserver, etcd = state.components["apiserver"], state.components["etcd"]
            tls = admin_tls(state.pki_dir)

            def etcd_connections() -> int:
                return established_to_port(apiserver.pid, etcd.port)

            replayed = None
            if replay is not None:  # the cluster as it is: its CRDs, then SOURCE on top
                copies = Path(home) / "replayed"
                copies.mkdir()
                replayed = asyncio.run(_export_crds(*replay, copies))
                click.echo(f"--measure: replaying the {replayed} CRDs of context {replay[0]} into the lab", err=True)
                if replayed:
                    _load_into(state, str(copies), ())
            wait_until_idle(apiserver.pid)
            before = snapshot(state.server, tls, etcd_connections)
            click.echo(f"--measure: lab {state.kubernetes_version} up; loading {source}", err=True)
            seconds = _load_into(state, source, arguments)
            wait_until_idle(apiserver.pid)
            after = snapshot(state.server, tls, etcd_connections)
        finally:
            lab.down()
    rows = compare(predicted, before, after, seconds)
    if as_json:
        click.echo(json.dumps({"source": source, "kubernetes": state.kubernetes_version,
                               "model": predicted.model_note, "replayed_crds": replayed,
                               "before": before, "after": after, "comparison": comparison_json(rows)}, indent=1))
    else:
        on_top = f" holding the {replayed} CRDs of context {replay[0]}" if replay is not None else ""
        click.echo(f"{source} on a fresh lab of Kubernetes {state.kubernetes_version}{on_top} "
                   f"({predicted.model_note}):")
        click.echo(comparison_table(rows))


def _measure_activation(selection: MRDSelection, predicted: Estimate, minor: str, as_json: bool) -> None:
    """The selection's MRDs installed through Crossplane on a fresh lab, the MRAP applied; print both columns."""
    from crdscope.costmodel.activation_measure import compare_activation, measure_activation
    from crdscope.costmodel.measure import comparison_json, comparison_table

    measured = measure_activation(selection, minor, say=lambda line: click.echo(line, err=True))
    rows = compare_activation(predicted, measured.before, measured.after, measured.activation_seconds)
    if as_json:
        click.echo(json.dumps({"activate": {"patterns": list(selection.patterns), "mrds": list(selection.names)},
                               "kubernetes": measured.kubernetes_version, "crossplane": measured.crossplane_version,
                               "package": measured.package, "model": predicted.model_note,
                               "activation_seconds": round(measured.activation_seconds, 2),
                               "before": measured.before, "after": measured.after,
                               "comparison": comparison_json(rows)}, indent=1))
        return
    click.echo(f"activating {' '.join(selection.patterns)} ({len(selection.crds)} MRDs) through Crossplane "
               f"{measured.crossplane_version} on a fresh lab of Kubernetes {measured.kubernetes_version} "
               f"({predicted.model_note}; priced {predicted.path_note}); all Established "
               f"{measured.activation_seconds:.0f}s after the MRAP:")
    click.echo(comparison_table(rows))
