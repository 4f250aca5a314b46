"""``crdscope attach`` and ``crdscope serve-web``: viewers of a collector (``watch --headless --serve-view``)."""

from __future__ import annotations

import click

from crdscope.base.errors import ConfigError


@click.command()
@click.argument("url")
@click.option("--token-file", required=True, type=click.Path(dir_okay=False),
              help="the collector's bearer token (its `--token-file`, or the file it generated)")
@click.option("--ca-file", default=None, type=click.Path(dir_okay=False, exists=True),
              help="CA bundle for an https collector with a private certificate")
@click.option("--headless", is_flag=True, help="print the collector's events and findings as lines, no screen")
@click.option("--duration", default=None, help="with --headless: stop after this long (e.g. 90s, 5m)")
@click.option("--record", default=None, type=click.Path(dir_okay=False), help="record what arrives to this file")
@click.option("--no-record", is_flag=True, help="do not record (the default: the collector records)")
@click.option("--theme", default=None, help="colour theme of the monitor")
def attach(url: str, token_file: str, ca_file: str | None, headless: bool, duration: str | None, record: str | None,
           no_record: bool, theme: str | None) -> None:
    """The monitor on a collector's stream (URL from `watch --headless --serve-view`): every panel,
    findings, fleet and compare screens, with no probe of its own and no request to any API server.

    Exits 3 with one line on a wrong token or an unreachable collector; once attached, a collector
    that restarts is waited for (the header says so) and followed.
    """
    if duration and not headless:
        raise click.UsageError("--duration goes with --headless (quit the screen with q)")
    chosen = None if no_record else record
    if headless:
        from crdscope.session.headless import attach_headless

        attach_headless(url, token_file, ca_file=ca_file, duration=duration, record=chosen)
        return
    from crdscope.tui.launch import open_attached

    open_attached(url, token_file, ca_file=ca_file, record=chosen, theme=theme)


@click.command("serve-web")
@click.argument("address", metavar="[HOST]:PORT")
@click.option("--attach", "url", required=True, metavar="URL", help="the collector each visit attaches to")
@click.option("--token-file", required=True, type=click.Path(dir_okay=False),
              help="the collector's token: the page asks for the same one")
@click.option("--ca-file", default=None, type=click.Path(dir_okay=False, exists=True),
              help="CA bundle for an https collector with a private certificate")
@click.option("--tls-cert", default=None, type=click.Path(dir_okay=False), help="serve the page over TLS: certificate")
@click.option("--tls-key", default=None, type=click.Path(dir_okay=False), help="serve the page over TLS: its key")
@click.option("--public-url", default=None, metavar="URL",
              help="the address browsers use, when it is not HOST:PORT (a proxy, a name)")
def serve_web(address: str, url: str, token_file: str, ca_file: str | None, tls_cert: str | None,
              tls_key: str | None, public_url: str | None) -> None:
    """Serve `crdscope attach URL` to browsers (textual-serve: one viewer process per visit), behind
    the collector's token: open http://HOST:PORT/?token=TOKEN (a projector, someone without a
    terminal).  Loopback unless HOST is given."""
    from crdscope.session.attach import open_collector
    from crdscope.session.viewserver import parse_view_listen, server_tls
    from crdscope.session.viewstream import read_token

    host, port = parse_view_listen(address)
    if port == 0:
        raise ConfigError("serve-web needs a port of its own (browsers are given its address)")
    tls = server_tls(tls_cert, tls_key)
    token = read_token(token_file)
    open_collector(url, token_file, ca_file)  # a wrong token or a collector not there: one line now, exit 3
    from crdscope.tui.web import TokenGatedServer, attach_command

    TokenGatedServer(attach_command(url, token_file, ca_file), host, port, token, tls=tls,
                     public_url=public_url).run()
