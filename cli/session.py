"""``crdscope replay FILE`` and ``crdscope report FILE``: recorded sessions, played back and summarised."""

from __future__ import annotations

import click


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--headless", is_flag=True, help="no screen: print one line per event as the recording plays")
@click.option("--json", "as_json", is_flag=True, help="with --headless: print every sample and event as JSON lines")
@click.option("--speed", type=float, default=None,
              help="playback speed (1 = real time; 0 = as fast as possible; "
                   "default 1 on screen, 0 headless)")
@click.option("--theme", default=None, help="colour theme of the monitor")
def replay(file: str, headless: bool, as_json: bool, speed: float | None, theme: str | None) -> None:
    """Open the monitor on a recording (play/pause, speed, step, seek)."""
    from crdscope.session.replay import read_recording

    recording = read_recording(file)
    if recording.damage is not None:
        click.echo(f"crdscope: {recording.damage.message()}", err=True)
    if headless or as_json:
        from crdscope.session.headless import replay_headless

        replay_headless(recording, speed=0.0 if speed is None else speed, as_json=as_json)
        return
    from crdscope.tui.replay_bar import run_replay_app

    run_replay_app(recording, speed=1.0 if speed is None else speed, theme=theme)


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--format", "form", type=click.Choice(["md", "html"]), default="md", show_default=True,
              help="Markdown, or one HTML page with inline SVG plots")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None, help="write here instead of stdout")
def report(files: tuple[str, ...], form: str, output: str | None) -> None:
    """Summarise a recorded session: CRDs, discovery, APF, OpenAPI, memory, restarts, outages.

    Several FILES (a fleet watch records one per cluster) make one report: a row per cluster,
    then each cluster's report."""
    from crdscope.base.errors import ConfigError
    from crdscope.session.report import summarise
    from crdscope.session.report_render import render_fleet

    summaries = [summarise(file) for file in files]
    text = render_fleet(summaries, form)
    for summary in summaries:
        if summary.damage is not None:
            click.echo(f"crdscope: {summary.path.name}: {summary.damage.message()}" if len(summaries) > 1
                       else f"crdscope: {summary.damage.message()}", err=True)
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        with open(output, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise ConfigError(f"cannot write {output}: {exc.strerror}") from None
    click.echo(f"report written to {output}", err=True)
