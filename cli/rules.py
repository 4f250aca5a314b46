"""``crdscope rules``: Prometheus alerting rules equivalent to the findings, on stdout."""

from __future__ import annotations

import click


@click.command()
@click.option("--job", default="crdscope", show_default=True,
              help="job label of the scrape of crdscope's exporter ('' for none)")
@click.option("--apiserver-job", default="apiserver", show_default=True,
              help="job label of the scrape of the API server's /metrics ('' for none)")
@click.option("--runbook-url", default=None, metavar="URL",
              help="the runbook page each rule's runbook_url points into (then #<finding kind>); "
                   "default: [rules] runbook_url in config.toml, else docs/runbook.md")
def rules(job: str, apiserver_job: str, runbook_url: str | None) -> None:
    """Print Prometheus alerting rules over crdscope's exporter and the API server's metrics."""
    from crdscope.base.settings import load_settings
    from crdscope.session.rules import render_rules

    settings = load_settings()
    click.echo(render_rules(settings.thresholds, job or None, apiserver_job or None,
                            runbook_url or settings.rules.runbook_url), nl=False)
