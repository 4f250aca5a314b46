"""``crdscope package SOURCE --name NAME``: real Crossplane provider packages from any loader source.

Thin: the work is :mod:`loader.package` (imported when the command runs); this file only turns
flags into a call and the result into lines for people or one JSON object.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from crdscope.cli.main import registry_config_option

if TYPE_CHECKING:
    from crdscope.loader.package import PackageRun


@click.command()
@click.argument("source", required=False)
@click.option("--name", "name", required=True, metavar="NAME",
              help="the package's name (with --family: NAME-<service> and the family package)")
@click.option("--family", is_flag=True,
              help="one package per service and a family package they depend on, as Upbound's provider families")
@click.option("--safe-start", "safe_start", is_flag=True,
              help="declare the safe-start capability: Crossplane creates no CRD until an activation policy names it")
@click.option("--push", is_flag=True, help="push every package to REGISTRY/crdscope/<package>:<version>")
@click.option("--registry", default=None, metavar="HOST:PORT",
              help="where --push pushes and dependencies point [default: the lab's registry]")
@click.option("--lab", "lab_name", default="", metavar="NAME", help="the lab whose registry is the default")
@click.option("--version", "version", default="v0.1.0", show_default=True, metavar="TAG",
              help="the packages' tag (a semantic version)")
@click.option("--output", default=".", show_default=True, type=click.Path(file_okay=False),
              help="directory for the .xpkg files (<package>-<version>.xpkg)")
@click.option("--from-context", default=None, metavar="CTX", help="package the CRDs of another kubeconfig context")
@click.option("--kubeconfig", default=None, type=click.Path(dir_okay=False), help="kubeconfig of --from-context")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object listing the packages")
@registry_config_option
def package(source: str | None, name: str, family: bool, safe_start: bool, push: bool, registry: str | None,
            lab_name: str, version: str, output: str, from_context: str | None, kubeconfig: str | None,
            as_json: bool) -> None:
    """Build Crossplane v2 provider packages (.xpkg) of SOURCE's CRDs with the real Crossplane CLI.

    SOURCE is anything `crdscope load` reads: a directory, a .tar/.tar.gz/.tar.xz archive, a YAML
    file, '-' (stdin), synthetic:N, a .xpkg or a package reference REGISTRY/REPO:TAG.  Without
    --family: one package NAME holding every CRD.  With --family: the provider's own groups
    (aws.upbound.io, aws.m.upbound.io) go to provider-family-X (for NAME provider-X; else
    NAME-family), every other group to NAME-<its first label> (s3.aws.upbound.io and
    s3.aws.m.upbound.io: provider-aws-s3), each member
    depending on the family package."""
    from crdscope.loader.package import build_packages
    from crdscope.loader.sources import open_source

    chosen = open_source(source, from_context=from_context, kubeconfig=kubeconfig)
    if registry is None and not lab_name:  # the lab whose registry is the default: maybe a named one
        from crdscope.lab.lookup import find_lab

        lab_name = find_lab(kubeconfig=kubeconfig, say=lambda line: click.echo(line, err=True)).name
    run = build_packages(chosen, name=name, family=family, safe_start=safe_start, push=push, registry=registry,
                         lab=lab_name, version=version, output=Path(output))
    if as_json:
        click.echo(json.dumps(run.to_json()))
    else:
        click.echo(_summary(run))


def _summary(run: PackageRun) -> str:
    """The packages for people: one row each, then where they went."""
    from .output import table

    total = sum(len(p.plan.crds) for p in run.packages)
    safe = " (safe-start)" if any(p.safe_start for p in run.packages) else ""
    lines = [f"built {len(run.packages)} package{'s' if len(run.packages) != 1 else ''} of {total} CRDs "
             f"from {run.source}, version {run.version}{safe}"]
    rows = [[p.plan.name, str(len(p.plan.crds)), str(len(p.plan.groups)), p.reference or str(p.file)]
            for p in run.packages]
    lines += table(["package", "CRDs", "groups", "pushed as" if run.pushed else "file"], rows, limit=len(rows),
                   align="lrrl")
    extra = [f"{run.not_crds} documents that are not CRDs ignored" if run.not_crds else "",
             f"{run.skipped} repeated CRD names skipped" if run.skipped else ""]
    lines += [f"  {text}" for text in extra if text]
    return "\n".join(lines)
