"""``crdscope mrap``: which managed resource kinds a platform needs active, checked against its MRAPs.

Read-only (a fixed number of GETs, or files with ``--from``).  ``--yaml`` prints the planned MRAP
alone, for ``kubectl apply -f -``; ``--apply`` writes it (server-side apply, only with ``--context NAME``
spelled out, never over an MRAP crdscope did not create) and waits until every CRD it activates is
Established.  Exit 2 when a composed kind is inactive or has no MRD (XRs composing it fail), except
with ``--yaml``, which prints the fix and exits 0.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from crdscope.cli.main import cluster_options, registry_config_option, run_async

if TYPE_CHECKING:
    from crdscope.base.activation import ActivationReport
    from crdscope.cli.gate import Crossed
    from crdscope.costmodel.planner import PlanCost, Platform
    from crdscope.costmodel.upgrade import Upgrade
    from crdscope.session.failif import Comparison

MIB = float(1 << 20)
CRITICAL_EXIT = 2


#: ``--help``'s example of a gate (and the one a malformed expression's error gives).
FAIL_IF_EXAMPLE = "upgrade.memory.held_added_mib>500"
#: What gives a figure that is null without it (said when a --fail-if names one).
NULL_HINTS = {"upgrade": "--from NEW --context CTX prices an upgrade"}


@click.command()
@click.option("--from", "source", default=None, metavar="SOURCE",
              help="read the platform from files instead of a cluster: a directory of XRDs, Compositions, "
                   "MRAPs and packages (.xpkg), a YAML file, a .xpkg, or a package reference REGISTRY/REPO:TAG; "
                   "with --context: a release to install over what that cluster runs (the upgrade is priced)")
@click.option("--json", "as_json", is_flag=True, help="one JSON object (stable keys, units in names)")
@click.option("--format", "output_format", type=click.Choice(["text", "md"]), default="text", show_default=True)
@click.option("--yaml", "as_yaml", is_flag=True, help="print only the planned MRAP, for kubectl apply -f -")
@click.option("--name", "plan_name", default=None, metavar="NAME",
              help="the planned MRAP's name [default: crdscope-activation-plan]")
@click.option("--kubernetes", "kubernetes_minor", default=None, metavar="MINOR",
              help="price with this minor's cost model [default: the cluster's; from files: the newest]")
@click.option("--apply", "apply", is_flag=True,
              help="write the planned MRAP (needs --context NAME) and wait until its CRDs are Established")
@click.option("--timeout", "timeout", type=float, default=600.0, show_default=True, metavar="SECONDS",
              help="--apply: how long to wait for the activated CRDs")
@click.option("--fail-if", "fail_if", multiple=True, metavar="EXPR",
              help=f"exit 1 when a figure crosses EXPR (repeatable; checked before --apply writes anything), e.g. "
                   f"'{FAIL_IF_EXAMPLE}', 'upgrade.crds_added>200': a key of --json, nested ones joined by dots "
                   "(an interval compares by its value, .high by its upper bound): upgrade.crds_added, "
                   "upgrade.crds_removed, upgrade.crds_changed, upgrade.mrds_added, upgrade.mrds_activated, "
                   "upgrade.mrds_memory_added_mib, upgrade.memory.rss_added_mib, upgrade.memory.held_added_mib, "
                   "upgrade.discovery.group_versions_added (with --from and --context); cost.adds_crds, "
                   "cost.adds_bytes, cost.plan_crds, mrds, mrds_active")
@cluster_options
@registry_config_option
def mrap(source: str | None, as_json: bool, output_format: str, as_yaml: bool, plan_name: str | None,
         kubernetes_minor: str | None, apply: bool, timeout: float, fail_if: tuple[str, ...], kubeconfig: str | None,
         context: str | None) -> None:
    """What a Crossplane platform needs activated: the kinds its Compositions compose and the kinds
    in use, against its MRDs and MRAPs, and the smallest MRAP that activates exactly those.  With
    --from and --context: the release in the files installed over what the cluster runs, priced."""
    from crdscope.base.errors import ConfigError
    from crdscope.cli.gate import judge, parse_gates
    from crdscope.costmodel.planner import price, report_of

    gates = parse_gates(fail_if, FAIL_IF_EXAMPLE)
    if apply and source:
        raise ConfigError("--apply writes to a cluster: it does not go with --from")
    if sum((as_json, as_yaml, output_format == "md")) > 1:
        raise ConfigError("choose one of --json, --yaml and --format md")
    if kubernetes_minor:
        from crdscope.costmodel.coefficients import parse_minor

        parse_minor(kubernetes_minor)
    platform, upgrade = _read(source, context, kubeconfig, kubernetes_minor)
    report = report_of(platform, plan_name)
    cost = price(report, platform, kubernetes_minor)
    crossed = judge(gates, to_json(platform, report, cost, upgrade), NULL_HINTS)  # checked before any output
    _print(platform, report, cost, upgrade, gates, crossed, as_json=as_json, as_yaml=as_yaml,
           output_format=output_format)
    if apply and not crossed:
        from crdscope.costmodel.plan_apply import apply_plan

        run_async(apply_plan(report.plan, context, kubeconfig, timeout, say))
        return  # the plan is active: what was critical before it is not any more
    _exit(report, crossed, as_yaml=as_yaml, apply=apply)


def _read(source: str | None, context: str | None, kubeconfig: str | None,
          kubernetes_minor: str | None) -> tuple[Platform, Upgrade | None]:
    """The platform to judge: the cluster's, the files', or (both) the cluster's once the files'
    release is installed over it, with that upgrade priced."""
    from crdscope.costmodel.planner import platform_from_files, read_platform

    if not source:
        return run_async(read_platform(context, kubeconfig)), None
    release = platform_from_files(source)
    if context is None:
        return release, None
    from crdscope.costmodel.upgrade import price_upgrade, read_upgrade, states_after, upgraded

    cluster, installed, minor, target = run_async(read_upgrade(release, context, kubeconfig))
    upgrade = price_upgrade(cluster, release, installed, target, kubernetes_minor or minor)
    return upgraded(cluster, release, states_after(cluster, release, frozenset(c.name for c in installed))), upgrade


def _print(platform: Platform, report: ActivationReport, cost: PlanCost, upgrade: Upgrade | None,
           gates: tuple[Comparison, ...], crossed: tuple[Crossed, ...], *, as_json: bool, as_yaml: bool,
           output_format: str) -> None:
    from crdscope.cli.gate import gate_json

    if as_yaml:
        click.echo(report.plan.yaml(), nl=False)
    elif as_json:
        click.echo(json.dumps({**to_json(platform, report, cost, upgrade), "fail_if": gate_json(gates, crossed)},
                              indent=2))
    elif output_format == "md":
        click.echo(to_markdown(platform, report, cost, upgrade))
    else:
        click.echo(to_text(platform, report, cost, upgrade))


def _exit(report: ActivationReport, crossed: tuple[Crossed, ...], *, as_yaml: bool, apply: bool) -> None:
    """Exit 2 when a composed kind is inactive or has no MRD (except with --yaml, which prints the fix:
    `mrap --yaml | kubectl apply -f -` passes under pipefail), which outranks a crossed gate (exit 1);
    a crossed gate's line is printed either way, and with --apply nothing was written."""
    from crdscope.cli.gate import crossed_line, enforce

    if crossed and apply:
        say("mrap: --apply: nothing written, a --fail-if gate is crossed")
    if not as_yaml and any(v.severity == "critical" for v in report.verdicts):
        if crossed:
            say(f"crdscope: {crossed_line(crossed)}")
        raise SystemExit(CRITICAL_EXIT)
    enforce(crossed)


def say(line: str) -> None:
    click.echo(line, err=True)


def _mib(value: float) -> str:
    return f"{value / MIB:,.0f} MiB"


def _interval(interval: Any, unit: str = "MiB") -> str:
    if unit == "s":
        return f"{interval.value:,.0f} s [{interval.low:,.0f}-{interval.high:,.0f}]"
    return f"{interval.value / MIB:,.0f} MiB [{interval.low / MIB:,.0f}-{interval.high / MIB:,.0f}]"


def _header(platform: Platform, report: ActivationReport) -> str:
    version = f" (Kubernetes {platform.minor})" if platform.minor else ""
    requests = f" with {platform.requests} requests" if platform.requests else ""
    return (f"{platform.described}{version}: {report.compositions} Compositions, {report.mrds:,} MRDs "
            f"({report.active:,} active), {len(platform.policies)} MRAPs; read in {platform.read_seconds:.2f} s"
            f"{requests}")


def cost_lines(report: ActivationReport, cost: PlanCost) -> list[str]:
    """What the plan costs and saves, for people."""
    from crdscope.costmodel.model import ACTIVATION

    priced = ("each CRD's own schema" if cost.priced_by == "schemas" else
              "typical CRDs of the calibration's provider set (an MRD's schema is not read from a cluster)")
    model = f"Kubernetes {cost.model_minor}" + (f" ({cost.note})" if cost.model_minor != cost.minor else "")
    lines = [f"the plan activates {cost.plan_crds:,} kinds: their CRDs ~ {_interval(cost.plan_bytes)}"]
    timed = "all Established ~ {} after the MRAP" if cost.path == ACTIVATION else "installed in ~ {}"
    if cost.adds_crds:
        lines.append(f"applying it now activates {cost.adds_crds:,} more: + {_interval(cost.adds_bytes)}, "
                     + timed.format(_interval(cost.adds_seconds, 's')))
    else:
        lines.append("applying it now activates nothing new: every needed kind is active")
    lines.append(f"against activating all {cost.all_crds:,} MRDs ({_interval(cost.all_bytes)}): saves "
                 f"{_interval(cost.saving_vs_all_bytes)}, and a fresh activation takes "
                 f"{_interval(cost.plan_install_seconds, 's')} instead of {_interval(cost.all_install_seconds, 's')}")
    if cost.active_crds > cost.plan_crds or cost.saving_vs_active_bytes.value:
        lines.append(f"against today's {cost.active_crds:,} active kinds: {_interval(cost.saving_vs_active_bytes)} "
                     "are held by kinds the plan leaves out; narrowing an MRAP frees none of it (an Active MRD "
                     "never goes back to Inactive): only a fresh install with this plan does")
    lines.append(f"the {cost.all_crds:,} MRDs stay whatever is activated: ~ {_mib(cost.mrd_bytes)} of their own "
                 "(about 0.8 MiB each, measured), which no plan saves")
    lines.append(f"priced by the cost model of {model}, {cost.path_note}, with {priced}")
    return lines


def upgrade_lines(upgrade: Upgrade) -> list[str]:
    """The release over the cluster's, for people: its MRDs, the CRDs of the Active ones, their price."""
    from crdscope.costmodel.model import ACTIVATION

    e = upgrade.estimate
    net = e.delta.schema_bytes_added if e.delta is not None else e.schema_bytes
    installed = len(e.delta.installed) if e.delta is not None else 0
    held = f", held {_interval(e.live_heap_bytes)}" if e.live_heap_bytes is not None else ""
    return [
        f"MRDs: {upgrade.installed_mrds:,} of the release's groups there; it adds {len(upgrade.mrds_added):,} "
        f"({len(upgrade.mrds_activated):,} Active at once: each brings its CRD) and removes "
        f"{len(upgrade.mrds_removed):,}: {_mib(upgrade.mrd_bytes_added)} of their own (about 0.8 MiB each, measured)",
        f"CRDs (Active MRDs): {installed:,} there; it adds {e.crds_added:,}, removes {e.crds_removed:,}, changes "
        f"{e.crds_changed:,} (schemas {net / 1024:+,.0f} KiB net), leaves {e.crds_unchanged:,} as they are",
        f"their memory added ~ {_interval(e.memory_bytes)}{held}; discovery +{e.group_versions_added} "
        f"-{e.group_versions_removed} group-versions; OpenAPI v2 {e.openapi_v2_bytes_added.value / MIB:+,.1f} MiB; "
        + ("all Established ~ {} after Crossplane activates them" if e.path == ACTIVATION
         else "install ~ {}").format(_interval(e.install_seconds, 's')),
        f"priced by the {e.model_note}, {e.path_note}",
    ]


def wake_lines(platform: Platform, report: ActivationReport) -> list[str]:
    """Which provider runtimes scaled to zero (Crossplane v2.4+, safe-start) the plan wakes, and which
    stay asleep; nothing when none awaits activation."""
    from crdscope.costmodel.planner import wakes

    if platform.runtimes is None:
        return []
    found = wakes(report, platform)
    if not found:
        if platform.runtimes and platform.minor:  # a cluster whose safe-start runtimes all run
            return ["no provider runtime is scaled to zero awaiting activation"]
        return []
    lines = []
    for wake in found:
        revision = f" ({wake.revision})" if wake.revision else ""
        if wake.wakes:
            lines.append(f"wakes {wake.provider}{revision}: activates {wake.activates:,} of its {wake.mrds:,} MRDs, "
                         "so Crossplane scales its runtime up from zero (a provider pod starts)")
        else:
            lines.append(f"leaves {wake.provider}{revision} scaled to zero: none of its {wake.mrds:,} MRDs is "
                         "in the plan")
    if not platform.minor:
        lines.append("(from files: what Crossplane v2.4+ does with safe-start providers; earlier releases run "
                     "every provider's runtime regardless)")
    return lines


def to_text(platform: Platform, report: ActivationReport, cost: PlanCost, upgrade: Upgrade | None = None) -> str:
    out = [_header(platform, report), ""]
    if upgrade is not None:
        out += ["Upgrade:", *[f"  {line}" for line in upgrade_lines(upgrade)], ""]
    out.append(f"Needed kinds ({len(report.needed)}):")
    width = max((len(n.mrd) for n in report.needed), default=0)
    for needed in report.needed:
        state = needed.state if needed.established is not False else f"{needed.state}, not Established"
        out.append(f"  {needed.mrd:<{width}}  {state:<10}  {'; '.join(needed.reasons)}")
    if not report.needed:
        out.append("  none: no Composition names a managed resource kind here and no kind has objects")
    out += ["", f"Verdicts ({len(report.verdicts)}):"]
    for verdict in report.verdicts:
        out.append(f"  {verdict.severity:<8}  {verdict.message}")
    if not report.verdicts:
        out.append("  none")
    if report.other_kinds:
        out.append(f"  (composed kinds that are not managed resources here: {', '.join(report.other_kinds)})")
    for problem in platform.problems:
        out.append(f"  note: {problem}")
    out += ["", f"Plan: MRAP {report.plan.name}, {len(report.plan.entries)} entries "
                "(`crdscope mrap --yaml | kubectl apply -f -`, or --apply --context NAME)"]
    out += [f"  {line}" for line in cost_lines(report, cost)]
    woken = wake_lines(platform, report)
    if woken:
        out += ["", "Provider runtimes awaiting activation:", *[f"  {line}" for line in woken]]
    out += ["", report.plan.yaml().rstrip("\n")]
    return "\n".join(out)


def to_markdown(platform: Platform, report: ActivationReport, cost: PlanCost, upgrade: Upgrade | None = None) -> str:
    out = [f"## Activation plan: {platform.described}", "", _header(platform, report), ""]
    if upgrade is not None:
        out += ["### Upgrade", "", *[f"- {line}" for line in upgrade_lines(upgrade)], ""]
    out += ["| needed kind | state | why |", "|---|---|---|"]
    out += [f"| `{n.mrd}` | {n.state} | {'; '.join(n.reasons)} |" for n in report.needed]
    out += ["", "| severity | verdict |", "|---|---|"]
    out += [f"| {v.severity} | {v.message.replace('|', '/')} |" for v in report.verdicts]
    out += ["", *[f"- {line}" for line in cost_lines(report, cost)]]
    woken = wake_lines(platform, report)
    if woken:
        out += ["", "Provider runtimes awaiting activation:", "", *[f"- {line}" for line in woken]]
    out += ["", "```yaml", report.plan.yaml().rstrip("\n"), "```"]
    return "\n".join(out)


def _interval_json(interval: Any) -> dict[str, float]:
    return {"value": interval.value, "low": interval.low, "high": interval.high}


def upgrade_json(upgrade: Upgrade | None, source: str) -> dict[str, Any] | None:
    """The upgrade's figures: ``estimate --json``'s keys for the CRDs of Active MRDs, and the MRDs'."""
    if upgrade is None:
        return None
    from crdscope.costmodel.report import to_json as estimate_json

    return {**estimate_json(upgrade.estimate, source=source), "installed_mrds": upgrade.installed_mrds,
            "mrds_added": len(upgrade.mrds_added), "mrds_removed": len(upgrade.mrds_removed),
            "mrds_activated": len(upgrade.mrds_activated),
            "mrds_memory_added_mib": round(upgrade.mrd_bytes_added / MIB, 1),
            "mrd_names": {"added": list(upgrade.mrds_added), "removed": list(upgrade.mrds_removed),
                          "activated": list(upgrade.mrds_activated)}}


def to_json(platform: Platform, report: ActivationReport, cost: PlanCost,
            upgrade: Upgrade | None = None) -> dict[str, Any]:
    import dataclasses

    from crdscope.costmodel.planner import wakes

    return {
        "source": platform.described, "kubernetes": platform.minor, "requests": platform.requests,
        "read_seconds": round(platform.read_seconds, 3), "compositions": report.compositions, "mrds": report.mrds,
        "mrds_active": report.active, "mraps": [p.name for p in platform.policies],
        "objects_known": report.objects_known,
        "needed": [dataclasses.asdict(n) for n in report.needed],
        "verdicts": [dataclasses.asdict(v) for v in report.verdicts],
        "dead_entries": [dataclasses.asdict(d) for d in report.dead_entries],
        "active_unused": list(report.active_unused), "not_established": list(report.not_established),
        "unreadable": [dataclasses.asdict(u) for u in report.unreadable], "other_kinds": list(report.other_kinds),
        "problems": list(platform.problems),
        "plan": {"name": report.plan.name, "activate": list(report.plan.patterns),
                 "entries": [dataclasses.asdict(e) for e in report.plan.entries], "yaml": report.plan.yaml()},
        # Provider runtimes scaled to zero awaiting activation (Crossplane v2.4+) and what the plan does to them
        # (null: the revisions were not read).
        "runtimes_awaiting": None if platform.runtimes is None else [
            {**dataclasses.asdict(w), "wakes": w.wakes} for w in wakes(report, platform)],
        # Intervals as {value, low, high}; every other figure as it is.
        "cost": {key: _interval_json(getattr(cost, key)) if isinstance(value, dict) else value
                 for key, value in dataclasses.asdict(cost).items()},
        "upgrade": upgrade_json(upgrade, platform.described),
    }
