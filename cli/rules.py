"""``crdscope rules``: Prometheus alerting rules equivalent to the findings, on stdout."""

from __future__ import annotations

import click


@click.command()
@click.option("--job", default="crdscope", show_default=True,
              help="job label of the scrape of crdscope's exporter ('' for none)")
@click.option("--apiserver-job", default="apiserver", show_default=True,
              help="job label of the scrape of the API server's /metrics ('' for none)")
def rules(job: str, apiserver_job: str) -> None:
    """Print Prometheus alerting rules over crdscope's exporter and the API server's metrics."""
    from crdscope.base.settings import load_settings
    from crdscope.session.rules import render_rules

    click.echo(render_rules(load_settings().thresholds, job or None, apiserver_job or None), nl=False)
