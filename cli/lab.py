"""``crdscope lab``: a local etcd + kube-apiserver of a chosen Kubernetes version, in the background.

Registered lazily from ``cli/main.py``; every heavy import happens inside a command.
"""

from __future__ import annotations

import json
from typing import Any
from collections.abc import Callable

import click

from crdscope.cli.main import Group, registry_config_option
from crdscope.lab.faults import ACTIONS


#: ``lab up --apiservers`` and ``--replica``: what issue 17 asks for (2-3 replicas behind one address).
MAX_APISERVERS = 3


def _say(line: str) -> None:
    click.echo(line, err=True)


def check_lab_name(name: str) -> None:
    """A lab's name makes file and context names: a one-line error unless letters, digits, '-', '_'
    (a bad flag: exit 2)."""
    from crdscope.base.errors import ConfigError

    if name and not all(c.isalnum() or c in "-_" for c in name):
        raise ConfigError(f"lab name {name!r}: letters, digits, '-' and '_' only")


def name_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--name``: which of several labs (default: the unnamed one)."""
    return click.option("--name", "name", default="", metavar="NAME",
                        help="a lab of its own (ports, directory, kubeconfig contexts) beside others")(function)


def _named_lab(name: str) -> Any:
    """The lab a command on a running lab means: ``--name``, else the default lab when it is up,
    else the one the current kubeconfig context points at (said on stderr)."""
    from crdscope.lab.lookup import find_lab

    check_lab_name(name)
    return find_lab(name, say=_say)


def kubernetes_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--kubernetes MINOR``: which supported Kubernetes minor to build or run."""
    return click.option("--kubernetes", "kubernetes", default=None, metavar="MINOR",
                        help="Kubernetes minor, e.g. 1.26 or 1.37 (default: the newest supported)")(function)


def binary_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--apiserver-bin`` and ``--etcd-bin``: binaries the user brings."""
    function = click.option("--etcd-bin", default=None, help="etcd executable to use")(function)
    function = click.option("--apiserver-bin", default=None, help="kube-apiserver executable to use")(function)
    return function


def crossplane_version_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--crossplane-version LINE``: which Crossplane core release the lab runs."""
    return click.option("--crossplane-version", "crossplane_version", default=None, metavar="VERSION",
                        help="Crossplane's core release: v2.4 (v2.4.2, the default) or v2.0 (v2.0.0); "
                             "`lab versions` lists them")(function)


def registry_auth_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--registry-auth``: the lab's registry asks for credentials (:mod:`lab.registry`)."""
    return click.option("--registry-auth", "registry_auth", is_flag=True,
                        help="the registry asks for credentials (Debian's docker-registry with htpasswd): the "
                             "lab writes them to a Docker config.json (for --registry-config) and a pull secret "
                             "in crossplane-system [default: an open registry]")(function)


def crossplane_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--crossplane``, ``--crossplane-version``, ``--activation PATTERN`` (repeatable), ``--registry-auth``."""
    function = registry_auth_option(function)
    function = click.option("--activation", "activations", multiple=True, metavar="PATTERN",
                            help="a pattern of Crossplane's default MRAP (repeatable; default '*' as "
                                 "upstream; 'none': no default MRAP)")(function)
    function = crossplane_version_option(function)
    return click.option("--crossplane", "with_crossplane", is_flag=True,
                        help="also run Crossplane v2's core and a package registry (built from Go modules)")(function)


@click.group(cls=Group, invoke_without_command=True)
@click.option("--source", default=None, metavar="SRC",
              help="what the monitor's loader loads: a directory, an archive, a YAML file, synthetic:N")
@click.option("--crossplane", "with_crossplane", is_flag=True,
              help="the demo with a real provider install: Crossplane in the lab, the provider's packages "
                   "pushed, installed through Crossplane once the monitor is up")
@click.option("--provider", default=None, metavar="SRC",
              help="with --crossplane: the provider's CRDs (anything `load` reads) "
                   "[default: ../shared/crds/provider-gcp.tar.xz, or where it is absent synthetic:800, "
                   "a family crdscope generates]")
@click.option("--name", "name", default="", metavar="NAME", help="a named lab (see `lab up --name`)")
@registry_auth_option
@registry_config_option
@click.pass_context
def lab(ctx: click.Context, source: str | None, with_crossplane: bool, provider: str | None, name: str,
        registry_auth: bool) -> None:
    """A local etcd + kube-apiserver: with no command, start it and open the monitor."""
    from crdscope.base.errors import LabError

    if ctx.invoked_subcommand is not None:
        if with_crossplane or provider or name or registry_auth:
            raise LabError(f"--crossplane, --provider, --registry-auth and --name of `crdscope lab` open the monitor: "
                           f"give them to `lab {ctx.invoked_subcommand}` after its name where it takes them",
                           exit_code=2)
        return
    if (provider or registry_auth) and not with_crossplane:
        raise LabError("--provider and --registry-auth are the demo's through Crossplane: use them with --crossplane",
                       exit_code=2)
    check_lab_name(name)
    if with_crossplane:
        from crdscope.tui.launch import open_crossplane_demo

        open_crossplane_demo(provider, name=name, source=source, registry_auth=registry_auth)
    else:
        from crdscope.tui.launch import open_lab_monitor

        open_lab_monitor(source, name=name)


@lab.command("build")
@click.option("--kubernetes", "kubernetes", multiple=True, metavar="MINOR",
              help="Kubernetes minor, e.g. 1.26 or 1.37 (default: the newest supported); repeat it for several")
@click.option("--all", "build_all", is_flag=True, help="build every supported version")
@click.option("--crossplane", "with_crossplane", is_flag=True,
              help="also Crossplane's core and CLI, the registry and kube-controller-manager (lab up --crossplane "
                   "runs them)")
@crossplane_version_option
def lab_build(kubernetes: tuple[str, ...], build_all: bool, with_crossplane: bool,
              crossplane_version: str | None) -> None:
    """Build kube-apiserver and etcd from Go modules (skipped when cached); first, what is missing and
    about how long it takes on this machine."""
    from crdscope.base.errors import LabError
    from crdscope.lab.binaries import build, cached_binaries, supported_minors, versions_for
    from crdscope.lab.buildplan import say_plan

    if crossplane_version and not with_crossplane:
        raise LabError("--crossplane-version picks the Crossplane to build: use it with --crossplane", exit_code=2)
    minors: list[str | None] = list(supported_minors() if build_all else kubernetes or [None])
    # kube-controller-manager runs beside Crossplane in a lab of the first minor named (the newest by default).
    beside = None if build_all else minors[0]
    say_plan(lambda line: click.echo(line, err=True), minors, crossplane=with_crossplane,
             crossplane_version=crossplane_version, controllers_for=beside)
    if with_crossplane:
        binaries, _ = _crossplane_ready((), crossplane_version, beside)
        click.echo(f"crossplane {binaries.version} in {binaries.crossplane.parent}, crank and crane "
                   f"{binaries.cli_version} in {binaries.crank.parent}")
    for minor in minors:
        versions = versions_for(minor)
        cached = cached_binaries(versions)
        if cached:
            click.echo(f"kube-apiserver {versions.kubernetes} already built in {cached.apiserver.parent}")
            continue
        from .progress import progress_lines

        with progress_lines(f"building kube-apiserver {versions.kubernetes}") as say:
            build(minor, progress=say)


@lab.command("versions")
@click.option("--json", "as_json", is_flag=True,
              help="one JSON object per minor, then per Crossplane release, a line each")
@click.option("--newest", is_flag=True,
              help="also ask the Go module proxy for each minor's newest tag (needs Go; says where a pin is behind, "
                   "and keeps the answer for the next `lab versions`)")
def lab_versions(as_json: bool, newest: bool) -> None:
    """List every supported Kubernetes minor (its pinned tag, pre-release or not, whether it is built, what it
    serves differently) and the Crossplane releases the lab runs."""
    from crdscope.lab.binaries import supported_minors

    for minor in supported_minors():
        row = _minor_row(minor, newest)
        if as_json:
            click.echo(json.dumps(row))
            continue
        where = f"built in {row['built']}" if row["built"] else f"not built (lab build --kubernetes {minor})"
        kind = "  pre-release" if row["prerelease"] else ("  (the default)" if row["default"] else "")
        served = row.get("newer_served")
        behind = f"  (the proxy serves {served}{row.get('newer_note', '')})" if served else ""
        click.echo(f"{minor}  {row['kubernetes']}{kind}  etcd {row['etcd']}  {where}{behind}")
        click.echo(f"      {row['serves']}")
    _crossplane_rows(as_json)


def _minor_row(minor: str, newest: bool) -> dict[str, Any]:
    """One minor of ``lab versions``: what is pinned and built, and a newer tag when one is known to be served
    (asked now with ``newest``, else as the last ``--newest`` found it)."""
    import time

    from crdscope.lab.binaries import build_record, cached_binaries, is_prerelease, newest_tag, read_newest, \
        record_newest, released_minors, served_defaults, versions_for

    versions = versions_for(minor)
    built = cached_binaries(versions)
    row: dict[str, Any] = {"minor": minor, "kubernetes": versions.kubernetes, "etcd": versions.etcd,
                           "prerelease": is_prerelease(versions.kubernetes),
                           "default": minor == released_minors()[-1],
                           "built": str(built.apiserver.parent) if built else None,
                           "serves": served_defaults(minor).notes()}
    if built:
        record = build_record(versions)
        row["build_seconds"], row["go"] = record.get("seconds"), record.get("go")
    if newest:
        row["newest_tag"] = newest_tag(minor, after=versions.kubernetes) or None
        if row["newest_tag"]:
            record_newest(minor, row["newest_tag"])
        found, note = row["newest_tag"], ""
    else:
        known = read_newest().get(minor, {})
        found = known.get("tag")
        note = (f", asked {time.strftime('%Y-%m-%d', time.localtime(known['checked_at']))} by "
                "`lab versions --newest`") if found and isinstance(known.get("checked_at"), (int, float)) else ""
    if found and found != versions.kubernetes:
        row["newer_served"], row["newer_note"] = found, note
    return row


def _crossplane_rows(as_json: bool) -> None:
    """The Crossplane core releases the lab runs (the default first) and where their build stands."""
    from crdscope.toolchain.crossplane import CLI_RELEASE, RELEASES, build_record, cached_binaries

    if not as_json:
        click.echo("crossplane (lab up --crossplane [--crossplane-version VERSION]):")
    for index, release in enumerate(RELEASES):
        built = cached_binaries(release.version)
        row: dict[str, Any] = {"crossplane": release.version, "line": release.line, "default": index == 0,
                               "built": str(built.crossplane.parent) if built else None,
                               "cli": CLI_RELEASE.version, "note": release.note}
        if built:
            row["build_seconds"] = build_record(release.version).get("seconds")
        if as_json:
            click.echo(json.dumps(row))
            continue
        where = f"built in {row['built']}" if built else \
            f"not built (lab build --crossplane --crossplane-version {release.line})"
        click.echo(f"  {release.line}  {release.version}{'  (the default)' if index == 0 else ''}  {where}")
        click.echo(f"      crank and crane from {CLI_RELEASE.version} (the CLI left the core repository after v2.0)"
                   + (f"; {release.note}" if release.note else ""))


@lab.command("up", context_settings={"ignore_unknown_options": True})
@binary_options
@kubernetes_option
@name_option
@click.option("--feature-gates", default="", metavar="GATES",
              help="kube-apiserver feature gates, e.g. AggregatedDiscoveryEndpoint=true")
@click.option("--apiserver-arg", "apiserver_args", multiple=True, metavar="--FLAG=VALUE",
              help="an extra kube-apiserver flag (repeatable; also accepted after `--`)")
@click.option("--memory-limit", default=None, metavar="SIZE",
              help="cgroup memory limit of the API server, e.g. 768Mi or 2Gi (OOM-killed past it)")
@click.option("--restart/--no-restart", "restart", default=None,
              help="restart a dead API server with a back-off, like a kubelet (default: on with --memory-limit)")
@click.option("--apiservers", type=click.IntRange(1, MAX_APISERVERS), default=1, show_default=True,
              help="kube-apiservers on the one etcd; more than one run behind haproxy (round robin)")
@crossplane_options
@registry_config_option
@click.argument("extra_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- APISERVER_FLAGS...]")
def lab_up(apiserver_bin: str | None, etcd_bin: str | None, kubernetes: str | None, name: str, feature_gates: str,
           apiserver_args: tuple[str, ...], memory_limit: str | None, restart: bool | None, apiservers: int,
           with_crossplane: bool, crossplane_version: str | None, activations: tuple[str, ...], registry_auth: bool,
           extra_args: tuple[str, ...]) -> None:
    """Start the lab in the background and return once it is ready."""
    from crdscope.lab.binaries import ensure_binaries
    from crdscope.base.errors import LabError
    from crdscope.lab.cgroups import parse_size
    from crdscope.lab.controlplane import Lab, LabOptions

    flags = (*apiserver_args, *extra_args)
    for flag in flags:
        if not flag.startswith("--"):
            raise LabError(f"extra kube-apiserver flags look like --flag=value, not {flag!r}", exit_code=2)
    check_lab_name(name)
    options = LabOptions(name=name, feature_gates=feature_gates, apiserver_args=flags,
                         memory_limit=parse_size(memory_limit) if memory_limit else 0, restart=restart,
                         apiservers=apiservers)
    if apiservers > 1:
        from crdscope.lab.balancer import haproxy_binary

        haproxy_binary()  # a one-line error before anything starts
    if options.memory_limit:
        from crdscope.lab.cgroups import check_available

        check_available()  # before a build of minutes, not after
    if (activations or crossplane_version or registry_auth) and not with_crossplane:
        raise LabError("--activation, --crossplane-version and --registry-auth are Crossplane's: use them with "
                       "--crossplane", exit_code=2)
    if registry_auth:
        from crdscope.lab.registry import check_tools

        check_tools()  # before a build of minutes, not after
    # Builds (Crossplane, the lab minor's kube-controller-manager) before the lab starts.
    crossplane = _crossplane_ready(activations, crossplane_version, kubernetes) if with_crossplane else None
    binaries = ensure_binaries(apiserver_bin, etcd_bin, kubernetes=kubernetes, progress=_say)
    lab_ = Lab(name=name)
    state = lab_.up(binaries, say=_say, options=options)
    click.echo(f"lab up: {state.server} (Kubernetes {state.kubernetes_version}, binaries from {binaries.origin})")
    if apiservers > 1:
        click.echo(f"{apiservers} kube-apiservers behind haproxy: " + ", ".join(
            f"replica {i} on port {c.port}" for i, c in enumerate(state.apiservers(), start=1)))
    if options.memory_limit:
        restarts = "restarted with a back-off when killed" if options.supervised else "not restarted"
        click.echo(f"memory limit: {options.memory_limit / 2**20:.0f} MiB on the API server ({restarts})")
    if crossplane is not None:
        try:
            _start_crossplane(lab_, state, *crossplane, registry_auth=registry_auth)
        except LabError as exc:
            again = f"crdscope lab crossplane{f' --name {name}' if name else ''}"
            raise LabError(f"the lab is up but Crossplane is not: {exc} (try again: `{again}`)",
                           detail=exc.detail) from None
    click.echo(f"kubeconfig: {state.kubeconfig} (context {state.admin_context})")
    click.echo(f"  export KUBECONFIG={state.kubeconfig}")


def _crossplane_ready(activations: tuple[str, ...], version: str | None, kubernetes: str | None,
                      controllers: bool = True) -> tuple[Any, list[str]]:
    """The Crossplane binaries of ``version`` and (``controllers``) the kube-controller-manager of the
    ``kubernetes`` minor (default the newest), built when missing, and the default MRAP's patterns."""
    from crdscope.lab import crossplane
    from crdscope.lab.binaries import controller_manager, versions_for
    from crdscope.toolchain.crossplane import crossplane_binaries, release_of

    patterns = crossplane.activations_of(activations)  # one-line errors before a build of minutes
    release_of(version)
    versions_for(kubernetes)
    from .progress import progress_lines

    with progress_lines("building Crossplane") as say:
        binaries = crossplane_binaries(progress=say, version=version)
        if controllers:
            controller_manager(kubernetes, progress=say)
        return binaries, patterns


def _start_crossplane(lab_: Any, state: Any, binaries: Any, activations: list[str], *,
                      registry_auth: bool = False) -> None:
    from crdscope.lab import crossplane
    from crdscope.lab.registry import PULL_SECRET

    crossplane.start(lab_, state, binaries, activations=activations, say=_say, registry_auth=registry_auth)
    lab_.start_supervisor(state)
    registry = state.components["registry"].port
    mrap = ", ".join(activations) if activations else "none"
    click.echo(f"crossplane {binaries.version}: registry 127.0.0.1:{registry}, default MRAP activates: {mrap}")
    if state.registry_config:
        click.echo(f"  the registry asks for credentials: --registry-config {state.registry_config}; "
                   f"Providers name the pull secret {PULL_SECRET} (spec.packagePullSecrets)")
    click.echo(f"  push packages with `crdscope package SOURCE --name NAME --push"
               f"{' --registry-config FILE' if state.registry_config else ''}`; "
               f"install one with a Provider whose package is 127.0.0.1:{registry}/crdscope/NAME:TAG")


@lab.command("crossplane")
@name_option
@click.option("--activation", "activations", multiple=True, metavar="PATTERN",
              help="a pattern of the default MRAP (repeatable; default '*'; 'none': no default MRAP)")
@crossplane_version_option
@registry_auth_option
@registry_config_option
def lab_crossplane(name: str, activations: tuple[str, ...], crossplane_version: str | None,
                   registry_auth: bool) -> None:
    """Start Crossplane v2's core and a package registry on a running lab."""
    from crdscope.lab.binaries import minor_of, supported_minors

    lab_ = _named_lab(name)
    state = lab_.require()
    if registry_auth:
        from crdscope.lab.registry import check_tools

        check_tools()
    minor = minor_of(state.kubernetes_version)
    binaries, patterns = _crossplane_ready(activations, crossplane_version, minor or None,
                                           controllers=minor in supported_minors())
    _start_crossplane(lab_, state, binaries, patterns, registry_auth=registry_auth)


@lab.command("down")
@name_option
def lab_down(name: str) -> None:
    """Stop the lab and remove its files."""
    stopped = _named_lab(name).down()
    click.echo(f"lab down ({len(stopped)} processes stopped)" if stopped else "no lab was up")


@lab.command("status")
@name_option
@click.option("--json", "as_json", is_flag=True)
def lab_status(name: str, as_json: bool) -> None:
    """Say what runs where (no lab up is an answer, exit 0)."""
    from crdscope.lab import crossplane
    from crdscope.lab.controlplane import tail

    lab_ = _named_lab(name)
    state = lab_.state()
    if state is None:
        which = f" named {lab_.name}" if lab_.name else ""
        if as_json:
            click.echo(json.dumps({"up": False, "name": lab_.name}))
        else:
            up = f"crdscope lab up --name {lab_.name}" if lab_.name else "crdscope lab up"
            click.echo(f"no lab{which} is up (`{up}` starts one)")
        return
    status = {"up": True, **lab_.status(), **crossplane.status(state)}
    if as_json:
        click.echo(json.dumps(status))
        return
    click.echo(f"server: {status['server']}  ready: {status['ready']}  Kubernetes {status['kubernetes_version']}")
    click.echo(f"kubeconfig: {status['kubeconfig']} (context {status['context']})")
    if isinstance(status.get("balancer"), str):
        click.echo(f"haproxy: {status['balancer']}")
    if status["memory_limit"]:
        click.echo(f"memory limit: {status['memory_limit'] / 2**20:.0f} MiB, supervisor "
                   f"{'running' if status['supervisor'] else 'not running'}")
    if "crossplane" in status:
        core = status["crossplane"]
        click.echo(f"crossplane {core['version']}: {'healthy' if core['healthy'] else 'NOT healthy'}, "
                   f"registry {core['registry']}, metrics on port {core['metrics_port']} "
                   "(no kubelet: provider runtimes never run)")
        if core.get("registry_config"):
            click.echo(f"registry credentials: {core['registry_config']} (--registry-config), "
                       f"pull secret {core['pull_secret']}")
    replica_of = {component: index for index, component in status.get("replicas", {}).items()}
    balancer = status.get("balancer", {})
    for component_name, component in status["components"].items():
        restarts = f", {component['restarts']} restarts" if component["restarts"] else ""
        label = f"{component_name} (replica {replica_of[component_name]})" if component_name in replica_of \
            else component_name
        seen = f", haproxy: {balancer[component_name]}" if isinstance(balancer, dict) and component_name in balancer \
            else ""
        click.echo(f"{label}: pid {component['pid']} port {component['port']} {component['state']}{restarts}{seen}")
        if component["state"] == "dead":
            click.echo(f"--- last lines of {component['log']}:")
            click.echo(tail(component["log"]))


@lab.command("limit")
@click.argument("size")
@name_option
def lab_limit(size: str, name: str) -> None:
    """Change the API server's memory limit in place (e.g. to end an OOM crash loop)."""
    from crdscope.lab.cgroups import parse_size

    limit = parse_size(size)  # a bad size is a flag error before any lab is looked for
    state = _named_lab(name).set_memory_limit(limit)
    click.echo(f"memory limit: {state.memory_limit / 2**20:.0f} MiB")


@lab.command("kubeconfig")
@name_option
def lab_kubeconfig(name: str) -> None:
    """Print the path of the lab's kubeconfig."""
    click.echo(_named_lab(name).require().kubeconfig)


def _fault_command(action: str, help_text: str) -> None:
    @lab.command(action, help=help_text)
    @click.argument("component", metavar="COMPONENT")
    @click.option("--replica", type=click.IntRange(1, MAX_APISERVERS), default=None, metavar="I",
                  help="which kube-apiserver of a lab of several (1-based; see `lab status`)")
    @name_option
    def command(component: str, replica: int | None, name: str) -> None:
        from crdscope.base.errors import LabError
        from crdscope.lab.controlplane import replica_name

        if replica is not None:
            if component != "apiserver":
                raise LabError("--replica names a kube-apiserver: use it with the component `apiserver`", exit_code=2)
            component = replica_name(replica)
        pid = getattr(_named_lab(name), action)(component)
        click.echo(f"{action} {component} (pid {pid})")


for _action, _help in ACTIONS.items():
    _fault_command(_action, _help)
