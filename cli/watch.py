"""``crdscope watch``: the monitor on a screen, or headless with thresholds and an exporter."""

from __future__ import annotations

import click

from .main import cluster_options, memory_limit_bytes, memory_limit_option, registry_config_option


@click.command()
@cluster_options(many=True)
@registry_config_option
@click.option("--headless", is_flag=True, help="run the probes without a screen, one line per notable event")
@click.option("--duration", default=None, help="stop after this long (e.g. 90s, 5m, 1h)")
@click.option("--record", "record", default=None, type=click.Path(dir_okay=False),
              help="record every sample to this file")
@click.option("--no-record", is_flag=True, help="do not record the session")
@click.option("--fail-if", "fail_if", multiple=True, metavar="EXPR",
              help="exit 1 when EXPR holds, e.g. 'discovery.seconds>5' (repeatable)")
@click.option("--serve-metrics", default=None, metavar="[HOST]:PORT",
              help="expose the probes' figures in Prometheus text format")
@click.option("--serve-view", "serve_view", default=None, metavar="[HOST]:PORT",
              help="with --headless: serve the live view to `crdscope attach` viewers (loopback unless HOST is given)")
@click.option("--token-file", default=None, type=click.Path(dir_okay=False),
              help="the viewers' bearer token (default: generated into the state directory)")
@click.option("--allow-control", is_flag=True,
              help="with --serve-view: offer viewers the loader and (on a lab) its faults (default: read-only)")
@click.option("--tls-cert", default=None, type=click.Path(dir_okay=False), help="serve the view over TLS: certificate")
@click.option("--tls-key", default=None, type=click.Path(dir_okay=False), help="serve the view over TLS: its key")
@click.option("--wait-for-cluster", "wait_for_cluster", default=None, metavar="DURATION",
              help="with --headless: how long to wait for a cluster that does not answer at start before exiting 3 "
                   "[default: 10s]")
@click.option("--prometheus", "prometheus_url", default=None, metavar="URL",
              help="read memory and restarts from this Prometheus (managed control planes)")
@memory_limit_option
@click.option("--openapi-v2", "openapi_v2", is_flag=True,
              help="also measure /openapi/v2 (each fetch makes the server build the whole document: off by default)")
@click.option("--theme", default=None, help="colour theme of the monitor")
@click.option("--source", default=None, metavar="SRC",
              help="what the loader loads: a directory, an archive, a YAML file, synthetic:N")
def watch(kubeconfig: str | None, context: tuple[str, ...], headless: bool, duration: str | None, record: str | None,
          no_record: bool, fail_if: tuple[str, ...], serve_metrics: str | None, serve_view: str | None,
          token_file: str | None, allow_control: bool, tls_cert: str | None, tls_key: str | None,
          wait_for_cluster: str | None, prometheus_url: str | None,
          memory_limit: str | None, openapi_v2: bool, theme: str | None, source: str | None) -> None:
    """Open the monitor on a cluster (the current context by default).

    Several ``--context`` watch a fleet from one process: on screen, the fleet screen (one row per
    cluster, Enter opens its monitor); with ``--headless``, one line stream (each line prefixed with
    its context) and one ``--serve-metrics`` endpoint whose series carry a ``cluster`` label.

    A headless watch whose cluster does not answer at start exits 3 after 10 s (``--wait-for-cluster``);
    a fleet's, only when no cluster answered.  A cluster lost after it answered is a finding: the
    watch goes on.
    """
    limit = memory_limit_bytes(memory_limit)
    contexts = tuple(context)
    if not headless and (serve_view or token_file or tls_cert or tls_key or allow_control):
        raise click.UsageError("--serve-view (and its --token-file, --allow-control, --tls-cert, --tls-key) needs "
                               "--headless: the collector runs without a screen; `crdscope attach` is the screen")
    if wait_for_cluster is not None and not headless:
        raise click.UsageError("--wait-for-cluster goes with --headless: the monitor opens at once and shows the "
                               "cluster coming back")
    if serve_view is None and (token_file or tls_cert or tls_key or allow_control):
        raise click.UsageError("--token-file, --allow-control, --tls-cert and --tls-key go with --serve-view")
    if headless:
        if source is not None:
            # The headless watch only observes; loading is `crdscope load SRC` beside it.
            raise click.UsageError("--source sets the monitor's loader; with --headless run `crdscope load SRC` "
                                   "beside the watch")
        from crdscope.session.headless import run_headless, view_options

        view = view_options(serve_view, token_file, tls_cert, tls_key, allow_control) if serve_view else None
        run_headless(kubeconfig=kubeconfig, contexts=contexts, duration=duration, record=record,
                     fail_if=fail_if, serve_metrics=serve_metrics, prometheus_url=prometheus_url,
                     memory_limit=limit, openapi_v2=openapi_v2, view=view, wait_for_cluster=wait_for_cluster)
        return
    if len(contexts) > 1:
        from crdscope.tui.launch import open_fleet_monitor

        open_fleet_monitor(contexts, kubeconfig=kubeconfig, record=None if no_record else (record or True),
                           prometheus_url=prometheus_url, theme=theme, source=source, memory_limit=limit,
                           openapi_v2=openapi_v2)
        return
    from crdscope.tui.launch import open_monitor

    open_monitor(kubeconfig=kubeconfig, context=contexts[0] if contexts else None,
                 record=None if no_record else (record or True),
                 prometheus_url=prometheus_url, theme=theme, source=source, memory_limit=limit,
                 openapi_v2=openapi_v2)


@click.command()
@click.argument("first", metavar="CONTEXT_A")
@click.argument("second", metavar="CONTEXT_B")
@click.option("--kubeconfig", "kubeconfig", default=None, type=click.Path(dir_okay=False),
              help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
@click.option("--no-record", is_flag=True, help="do not record the session")
@memory_limit_option
@click.option("--theme", default=None, help="colour theme of the monitor")
@click.option("--source", default=None, metavar="SRC", help="what the loader loads into both clusters")
def compare(first: str, second: str, kubeconfig: str | None, no_record: bool, memory_limit: str | None,
            theme: str | None, source: str | None) -> None:
    """Two clusters side by side: the same figures, the differences stated, memory, latency and
    discovery against each cluster's CRD count; `l` loads the same source into both."""
    if first == second:
        raise click.UsageError("compare needs two different contexts")
    from crdscope.tui.launch import open_fleet_monitor

    open_fleet_monitor((first, second), kubeconfig=kubeconfig, compare=True, record=None if no_record else True,
                       theme=theme, source=source, memory_limit=memory_limit_bytes(memory_limit))
