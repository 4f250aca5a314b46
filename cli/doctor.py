"""``crdscope doctor``: watch a cluster briefly, print the findings, exit by the worst one."""

from __future__ import annotations

import click

from .main import cluster_options, memory_limit_bytes, memory_limit_option


@click.command()
@cluster_options
@click.option("--duration", default="30s", show_default=True, help="how long to run the probes (e.g. 30s, 2m)")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
@click.option("--format", "fmt", type=click.Choice(["text", "md"]), default="text", show_default=True,
              help="text, or Markdown for an incident channel")
@memory_limit_option
@click.option("--openapi-v2", "openapi_v2", is_flag=True,
              help="also measure /openapi/v2 (each fetch makes the server build the whole document)")
def doctor(kubeconfig: str | None, context: str | None, duration: str, as_json: bool, fmt: str,
           memory_limit: str | None, openapi_v2: bool) -> None:
    """Run the probes for a short while and print what is wrong (exit 0 nothing, 1 warning, 2 critical)."""
    from crdscope.session.doctor import render, run_doctor
    from crdscope.session.durations import parse_duration

    seconds = parse_duration(duration)
    diagnosis = run_doctor(kubeconfig, context, seconds, memory_limit_bytes(memory_limit), openapi_v2=openapi_v2)
    click.echo(render(diagnosis, "json" if as_json else fmt))
    raise SystemExit(diagnosis.exit_code)
