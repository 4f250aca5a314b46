"""The ``crdscope`` command line: thin click wrappers that defer heavy imports.

Every expected failure is a :class:`probes.errors.CrdscopeError` and prints
one line (``crdscope: ...``) with its exit code; anything unexpected prints
one line too and leaves the traceback in the log file, never on screen.
"""

from __future__ import annotations

import json
import sys
from typing import Any
from collections.abc import Callable

import click

# httpx's package import pulls in its own optional command line (rich, pygments: tens of
# milliseconds) whenever rich is installed; crdscope never runs it, so a one-shot command
# skips it (httpx then defines a stub ``main``).  The monitor imports rich for itself anyway.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # a None entry blocks the import

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def broken_command(name: str, spec: str, exc: BaseException) -> click.Command:
    """A stand-in for a lazy command whose module does not load: running it (or asking for its
    help) fails with one line and exit code 70; the traceback goes to the log file."""
    from crdscope.base.errors import CrdscopeError
    from crdscope.base.logs import write_traceback

    where = write_traceback(exc)
    reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]

    def fail() -> None:
        raise CrdscopeError(f"command '{name}' cannot load ({spec}): {reason} (details in {where})",
                            exit_code=70)

    return click.Command(name, callback=fail, help=f"(cannot load: {reason})", add_help_option=False,
                         context_settings={"ignore_unknown_options": True, "allow_extra_args": True})


class Group(click.Group):
    """A click group that turns every error into one line and an exit code.

    Commands listed in ``lazy_commands`` (name -> ``module:attribute``) are
    imported only when invoked or listed, so ``crdscope --help`` stays fast and
    each feature keeps its command next to its code.
    """

    def __init__(self, *args: Any, lazy_commands: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy_commands and name not in self.commands:
            import importlib

            module, _, attribute = self.lazy_commands[name].partition(":")
            try:
                command = getattr(importlib.import_module(module), attribute)
            except (ImportError, AttributeError) as exc:
                # A listed command that does not load is a bug to see, not "No such command".
                command = broken_command(name, self.lazy_commands[name], exc)
            self.add_command(command, name)
        return super().get_command(ctx, name)

    def invoke(self, ctx: click.Context) -> Any:
        from crdscope.base.errors import CrdscopeError

        try:
            return super().invoke(ctx)
        except CrdscopeError as exc:
            click.echo(f"crdscope: {exc}", err=True)
            if exc.detail:
                click.echo(exc.detail, err=True)
            ctx.exit(exc.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("crdscope: interrupted", err=True)
            ctx.exit(130)
        except BrokenPipeError:
            # The reader went away (`crdscope lab versions | head`): nothing to say, and nothing more
            # to write; stdout points at /dev/null so that the interpreter's last flush is quiet too.
            import contextlib
            import os

            with contextlib.suppress(OSError, ValueError):  # a stdout without a descriptor (click's test runner)
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(141)  # 128 + SIGPIPE, as a shell reports a command the pipe closed on
        except Exception as exc:  # noqa: BLE001 - the last line of defence
            from crdscope.base.logs import write_traceback

            where = write_traceback(exc)
            message = " ".join(str(exc).split())[:200] or type(exc).__name__
            click.echo(f"crdscope: internal error: {message} (details in {where})", err=True)
            ctx.exit(70)


def cluster_options(function: Callable[..., Any] | None = None, *,
                    many: bool = False) -> Callable[..., Any]:
    """``--kubeconfig`` and ``--context``, on every command that talks to a cluster; with ``many``
    ``--context`` may be repeated (a fleet: the command gets a tuple)."""
    if function is None:
        return lambda wrapped: cluster_options(wrapped, many=many)
    function = click.option("--context", "context", default=None, multiple=many,
                            help="kubeconfig context (default: current)" + ("; repeat it to watch several "
                                                                             "clusters" if many else ""))(function)
    function = click.option(
        "--kubeconfig", "kubeconfig", default=None, type=click.Path(dir_okay=False),
        help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)",
    )(function)
    return function


def memory_limit_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--memory-limit SIZE``: the API server's memory limit, for headroom (watch, doctor, estimate)."""
    return click.option("--memory-limit", "memory_limit", default=None, metavar="SIZE",
                        help="the API server's memory limit (e.g. 8Gi): headroom, and when it would be "
                             "OOM-killed (a capped crdscope lab's is known without it)")(function)


def _use_registry_config(_ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value:
        from crdscope.loader.registry_auth import use_registry_config

        use_registry_config(value)


def registry_config_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--registry-config FILE``: Docker's ``config.json`` the pulls and pushes of this command read
    (:mod:`loader.registry_auth`), on every command that pulls or pushes a package."""
    return click.option("--registry-config", default=None, metavar="FILE", expose_value=False,
                        callback=_use_registry_config, type=click.Path(dir_okay=False),
                        help="registry credentials for package references and pushes: a Docker config.json "
                             "(auths, credHelpers, credsStore) [default: $DOCKER_CONFIG/config.json, "
                             "else ~/.docker/config.json]")(function)


def memory_limit_bytes(text: str | None) -> int | None:
    """``--memory-limit`` in bytes (None when not given); a bad size is a one-line error."""
    if not text:
        return None
    from crdscope.lab.cgroups import parse_size

    return parse_size(text)


def run_async(coroutine: Any) -> Any:
    """Run a coroutine to completion from a synchronous click command."""
    import asyncio  # only the commands that talk to a cluster pay for it

    return asyncio.run(coroutine)


def emit(data: dict[str, Any], as_json: bool, name: str = "") -> None:
    """Print a sample: one JSON object (the scripts' contract), or a summary for people."""
    if as_json:
        click.echo(json.dumps(data, sort_keys=False))
        return
    from .output import render_sample

    click.echo(render_sample(name, data))


#: Commands that live next to their feature's code.
LAZY_COMMANDS = {
    "watch": "crdscope.cli.watch:watch",
    "compare": "crdscope.cli.watch:compare",
    "load": "crdscope.cli.load:load",
    "clean": "crdscope.cli.load:clean",
    "replay": "crdscope.cli.session:replay",
    "report": "crdscope.cli.session:report",
    "estimate": "crdscope.cli.estimate:estimate",
    "lab": "crdscope.cli.lab:lab",
    "doctor": "crdscope.cli.doctor:doctor",
    "rules": "crdscope.cli.rules:rules",
    "package": "crdscope.cli.package:package",
    "mrap": "crdscope.cli.mrap:mrap",
    "demo": "crdscope.cli.demo:demo",
    "attach": "crdscope.cli.view:attach",
    "serve-web": "crdscope.cli.view:serve_web",
}


@click.group(cls=Group, invoke_without_command=True, context_settings=CONTEXT_SETTINGS,
             lazy_commands=LAZY_COMMANDS)
@click.version_option(package_name="crdscope", prog_name="crdscope")
@cluster_options(many=True)
@click.pass_context
def cli(ctx: click.Context, kubeconfig: str | None, context: tuple[str, ...]) -> None:
    """Watch a Kubernetes API server under CustomResourceDefinition pressure.

    With no command, opens the monitor on the current context (`crdscope --context X` is
    `crdscope watch --context X`).
    """
    if ctx.invoked_subcommand is None:
        watch = cli.get_command(ctx, "watch")  # never None: a broken import is a failing stand-in
        if watch is not None:
            ctx.invoke(watch, kubeconfig=kubeconfig, context=context)
    elif kubeconfig is not None or context:
        # Given before a command they would silently mean nothing to it (or, to a command that takes
        # them, be overridden by its own): they belong after the command's name, as its help shows.
        from crdscope.base.errors import ConfigError

        raise ConfigError(f"--context and --kubeconfig before a command open the monitor: give them after "
                          f"`{ctx.invoked_subcommand}` (crdscope {ctx.invoked_subcommand} --context ...)")


# --------------------------------------------------------------------------- probe


@cli.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
@click.option("--legacy", is_flag=True, help="discovery: walk every group-version instead of aggregated discovery")
@click.option("--qps", type=float, default=None, help="discovery: a client model with this QPS (with --burst)")
@click.option("--burst", type=int, default=None, help="discovery: the burst of that client model")
@click.option("--prometheus", "prometheus_url", default=None, metavar="URL",
              help="health: read memory and restarts from this Prometheus")
@click.option("--openapi-v2", "openapi_v2", is_flag=True,
              help="openapi: also fetch /openapi/v2 (the server builds the whole document for it)")
@click.option("--kubectl", "kubectl", is_flag=False, flag_value="kubectl", default=None, metavar="[PATH]",
              help="discovery: also time a real kubectl api-resources with a fresh cache dir (cold, warm)")
@cluster_options
def probe(name: str, as_json: bool, legacy: bool, qps: float | None, burst: int | None,
          prometheus_url: str | None, openapi_v2: bool, kubectl: str | None, kubeconfig: str | None,
          context: str | None) -> None:
    """Run probe NAME once and print its sample (version, discovery, throttling, inventory,
    openapi, health, latency)."""
    from crdscope.connection.cluster import Cluster
    from crdscope.probes.registry import oneshot

    function = oneshot(name)
    options: dict[str, Any] = {k: v for k, v in {"legacy": legacy or None, "qps": qps, "burst": burst,
                                                 "prometheus_url": prometheus_url, "kubectl": kubectl,
                                                 "openapi_v2": openapi_v2 or None}.items()
                               if v is not None}

    check_probe_options(name, function, options)

    async def main() -> dict[str, Any]:
        async with Cluster.connect(kubeconfig, context) as cluster:
            if name == "health":  # on a crdscope lab, its etcd connections are counted from /proc
                from crdscope.lab.restarts import restart_reader
                from crdscope.lab.sockets import etcd_connection_counter

                options["etcd_counter"] = etcd_connection_counter(cluster.server)
                options["platform_restarts"] = restart_reader(cluster.server)
            sample = await function(cluster, **options)
            return sample.to_json()

    data = run_async(main())
    emit(data, as_json, name)
    if data.get("error"):
        from crdscope.connection.cluster import failure_exit_code

        click.echo(f"crdscope: probe {name}: {data['error']}", err=True)
        sys.exit(failure_exit_code(data["error"]))


#: ``crdscope probe`` flags by the keyword of the one-shot function that takes them.
PROBE_FLAGS = {"legacy": "--legacy", "qps": "--qps", "burst": "--burst", "prometheus_url": "--prometheus",
               "kubectl": "--kubectl", "openapi_v2": "--openapi-v2"}


def check_probe_options(name: str, function: Callable[..., Any], options: dict[str, Any]) -> None:
    """A :class:`ConfigError` (before anything connects) for a flag probe ``name`` does not declare.

    A probe declares an option by naming it as a keyword of its one-shot function; a ``**rest``
    catch-all declares nothing.
    """
    if not options:
        return  # nothing to check: the plain command skips importing `inspect`
    import inspect

    from crdscope.base.errors import ConfigError

    keywords = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    parameters = list(inspect.signature(function).parameters.values())[1:]  # the first is the cluster
    declared = {p.name for p in parameters if p.kind in keywords}
    unknown = [PROBE_FLAGS.get(k, k) for k in options if k not in declared]
    if unknown:
        takes = sorted(PROBE_FLAGS[k] for k in declared if k in PROBE_FLAGS)  # others are wiring, not flags
        raise ConfigError(f"probe {name} does not take {', '.join(unknown)} "
                          f"({'it takes ' + ', '.join(takes) if takes else 'it takes no options'})")


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="crdscope")


if __name__ == "__main__":  # pragma: no cover
    main()
