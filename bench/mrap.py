"""Benchmark: `crdscope mrap` on a large platform, and its plan's saving predicted against measured.

``python -m bench mrap [--size N] [--compositions 100] [--kinds 3] [--runs 5] [--kubernetes 1.37] [--skip-saving]``:
a fresh lab of the minor with real Crossplane (no default MRAP), the AWS set
(``../shared/crds/provider-aws.tar.xz``; ``--size N``: its first N CRDs) as one ``safe-start``
provider package, so every CRD is an Inactive MRD; ``--compositions`` pipeline Compositions (a
patch-and-transform step and a go-templating step), each composing ``--kinds`` kinds drawn (seeded)
from the set, 1 to 3 groups each.  Then:

1. **How fast**: ``crdscope mrap --json`` ``--runs`` times (a new process each time, as a user
   runs it): wall seconds, the planner's own read seconds, the requests it counted, and the API
   server's own count of requests over one run (``apiserver_request_total`` before and after,
   kubectl's ``--raw /metrics`` scrapes excluded) against a run on a platform a tenth the size
   (``--compositions`` / 10): the same number of LIST requests means none per kind.
2. **What the plan saves**: the plan's prediction (``cost.saving_vs_all_bytes``, as the cluster
   read prices it: typical CRDs; and as ``--from`` the same files prices it: each CRD's schema), then
   the plan applied (``--yaml`` through kubectl) and the API server's RSS once idle, then an MRAP
   ``*`` (everything) and the RSS once idle again: the measured saving is the difference.

RSS is read from ``/proc`` (no request); idle is :func:`bench.labs.wait_until_idle`'s rule.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from crdscope.base.crossplane import becomes_mrd
from crdscope.lab.binaries import ensure_binaries
from crdscope.lab.controlplane import Lab, LabState

from .common import Options, Result, isolate_environment, say
from .crossplane import (CRD_LIST, INSTALL_TIMEOUT_SECONDS, MRD_LIST, _apply, _wait_count, count_of, crd_names,
                         keep_logs, providers_of, push_packages, rss_mib, wait_all_established)
from .discovery import crdscope_command
from .labs import crd_files, memory_for, wait_for_memory, wait_until_idle
from .versions import SET, first_crds, unpack_whole_set

MIB = float(1 << 20)
SEED = 39
#: libyaml's parser where built in: the AWS set is 102 MB of YAML.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def kinds_of(directory: Path) -> list[tuple[str, str, str, str]]:
    """(MRD name, group, first served version, kind) of every CRD file of the set."""
    found = []
    for path in crd_files(directory):
        crd = yaml.load(path.read_text(), Loader=_LOADER)
        spec = crd["spec"]
        version = next(v["name"] for v in spec["versions"] if v.get("served", True))
        found.append((crd["metadata"]["name"], spec["group"], version, spec["names"]["kind"]))
    return sorted(found)


def compositions(kinds: list[tuple[str, str, str, str]], count: int, per: int, seed: int = SEED) -> list[dict]:
    """``count`` pipeline Compositions, each composing ``per`` kinds of 1-3 groups (seeded)."""
    chooser = random.Random(seed)
    by_group: dict[str, list[tuple[str, str, str, str]]] = {}
    for kind in kinds:
        by_group.setdefault(kind[1], []).append(kind)
    groups = sorted(by_group)
    documents = []
    for index in range(count):
        chosen_groups = chooser.sample(groups, min(len(groups), chooser.randint(1, 3)))
        pool = sorted({kind for group in chosen_groups for kind in by_group[group]})
        while len(pool) < per and len(chosen_groups) < len(groups):  # small groups: one more group
            chosen_groups.append(chooser.choice([g for g in groups if g not in chosen_groups]))
            pool = sorted({kind for group in chosen_groups for kind in by_group[group]})
        picked = chooser.sample(pool, min(per, len(pool)))
        *bases, templated = picked  # at least one kind: the go-templating step's
        template = (f"---\napiVersion: {templated[1]}/{templated[2]}\nkind: {templated[3]}\nmetadata:\n"
                    "  annotations:\n    gotemplating.fn.crossplane.io/composition-resource-name: t\n"
                    "spec:\n  forProvider:\n    region: {{ .observed.composite.resource.spec.region }}\n")
        documents.append({
            "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
            "metadata": {"name": f"xplatform-{index:03d}"},
            "spec": {"compositeTypeRef": {"apiVersion": "platform.example.org/v1alpha1", "kind": f"XApp{index:03d}"},
                     "pipeline": [
                         {"step": "resources", "functionRef": {"name": "function-patch-and-transform"},
                          "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                                    "resources": [{"name": f"r{i}", "base": {"apiVersion": f"{b[1]}/{b[2]}",
                                                                             "kind": b[3]}}
                                                  for i, b in enumerate(bases)]}},
                         {"step": "templated", "functionRef": {"name": "function-go-templating"},
                          "input": {"apiVersion": "gotemplating.fn.crossplane.io/v1beta1", "kind": "GoTemplate",
                                    "source": "Inline", "inline": {"template": template}}}]}})
    return documents


def _mrap(state: LabState, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run([*crdscope_command(), "mrap", *args], capture_output=True, text=True, timeout=600)
    return done, time.monotonic() - started


def _cluster_args(state: LabState) -> list[str]:
    return ["--kubeconfig", state.kubeconfig, "--context", state.admin_context]


def _server_requests(state: LabState) -> dict[str, float]:
    """``apiserver_request_total`` by verb from the server's own /metrics (this scrape is one GET)."""
    from crdscope.connection.metrics import parse_text

    done = subprocess.run(["kubectl", *(f"--{k}={v}" for k, v in (("kubeconfig", state.kubeconfig),
                                                                 ("context", state.admin_context))),
                           "get", "--raw", "/metrics"], capture_output=True, timeout=120)
    scrape = parse_text(done.stdout, ["apiserver_request_total"])
    totals: dict[str, float] = {}
    for labels, value in scrape.series("apiserver_request_total"):
        verb = dict(labels).get("verb", "")
        totals[verb] = totals.get(verb, 0.0) + value
    return totals


def _requests_of_one_run(state: LabState) -> dict[str, int]:
    """What one ``crdscope mrap`` run cost the server, by verb (the scrapes' own GETs taken out)."""
    before = _server_requests(state)
    done, _ = _mrap(state, "--json", *_cluster_args(state))
    if done.returncode not in (0, 2):
        raise RuntimeError(done.stderr.strip())
    after = _server_requests(state)
    delta = {verb: int(after.get(verb, 0) - before.get(verb, 0)) for verb in after}
    delta["GET"] = delta.get("GET", 0) - 1  # the second scrape itself counts as a GET
    return {verb: count for verb, count in sorted(delta.items()) if count > 0}


def measure(minor: str, directory: Path, count: int, per: int, runs: int, saving: bool = True) -> dict[str, Any]:
    binaries = ensure_binaries(kubernetes=minor, progress=say)
    names = crd_names(directory)
    kinds = kinds_of(directory)
    figures: dict[str, Any] = {"crds": len(names), "compositions": count, "kinds_per_composition": per}
    with tempfile.TemporaryDirectory(prefix="crdscope-bench-mrap-") as home:
        lab = Lab(Path(home))
        state = lab.up(binaries, say=say)
        figures["kubernetes"] = state.kubernetes_version
        try:
            from crdscope.lab.crossplane import start
            from crdscope.toolchain.crossplane import crossplane_binaries

            xp = crossplane_binaries(progress=say)
            start(lab, state, xp, activations=[], say=say)
            state = lab.require()
            figures["crossplane"] = xp.version
            work = Path(home) / "packages"
            packages = push_packages(state, directory, family=False, safe_start=True, work=work)
            _apply(state, providers_of(packages))
            # ProviderConfig kinds stay CRDs on Crossplane v2.4: the MRDs are the rest.
            _wait_count(state, MRD_LIST, sum(1 for name in names if becomes_mrd(name)), "MRDs",
                        timeout=INSTALL_TIMEOUT_SECONDS)
            small = compositions(kinds, max(1, count // 10), per)
            _apply(state, small)
            wait_until_idle(state)
            figures["requests_small_platform"] = _requests_of_one_run(state)
            platform = compositions(kinds, count, per)
            _apply(state, platform)
            wait_until_idle(state)
            figures["requests_platform"] = _requests_of_one_run(state)
            walls, reads = [], []
            report: dict[str, Any] = {}
            for _ in range(runs):
                done, wall = _mrap(state, "--json", *_cluster_args(state))
                if done.returncode not in (0, 2):
                    raise RuntimeError(done.stderr.strip())
                report = json.loads(done.stdout)
                walls.append(wall)
                reads.append(report["read_seconds"])
            figures["mrap_wall_s"] = {"median": round(statistics.median(walls), 3), "max": round(max(walls), 3)}
            figures["mrap_read_s"] = {"median": round(statistics.median(reads), 3), "max": round(max(reads), 3)}
            figures["mrap_requests_counted"] = report["requests"]
            figures["needed"] = len(report["needed"])
            figures["plan_entries"] = len(report["plan"]["activate"])
            figures["predicted_saving_vs_all_mib_typical"] = {
                k: round(v / MIB) for k, v in report["cost"]["saving_vs_all_bytes"].items()}
            figures["predicted_plan_mib_typical"] = round(report["cost"]["plan_bytes"]["value"] / MIB)
            files = Path(home) / "platform"
            files.mkdir()
            (files / "platform.yaml").write_text(yaml.safe_dump_all(platform))
            for package in packages:
                (files / Path(package.file).name).write_bytes(Path(package.file).read_bytes())
            done, wall = _mrap(state, "--from", str(files), "--json", "--kubernetes", minor)
            if done.returncode not in (0, 2):
                raise RuntimeError(done.stderr.strip())
            from_files = json.loads(done.stdout)
            figures["from_files_wall_s"] = round(wall, 2)
            figures["predicted_saving_vs_all_mib_schemas"] = {
                k: round(v / MIB) for k, v in from_files["cost"]["saving_vs_all_bytes"].items()}
            figures["same_plan_from_files"] = from_files["plan"]["activate"] == report["plan"]["activate"]
            apiserver = state.components["apiserver"].pid
            figures["rss_inactive_mib"] = round(rss_mib(apiserver))
            if not saving:
                return figures
            plan, _ = _mrap(state, "--yaml", *_cluster_args(state))
            planned = {n["mrd"] for n in report["needed"]}
            baseline = count_of(state, CRD_LIST)
            _apply(state, [yaml.safe_load(plan.stdout)])
            wait_all_established(state, planned, baseline, time.monotonic() + INSTALL_TIMEOUT_SECONDS)
            wait_until_idle(state)
            figures["rss_plan_mib"] = round(rss_mib(apiserver))
            baseline = count_of(state, CRD_LIST)
            _apply(state, [{"apiVersion": "apiextensions.crossplane.io/v1alpha1",
                            "kind": "ManagedResourceActivationPolicy", "metadata": {"name": "everything"},
                            "spec": {"activate": ["*"]}}])
            wait_all_established(state, set(names) - planned, baseline, time.monotonic() + INSTALL_TIMEOUT_SECONDS)
            wait_until_idle(state)
            figures["rss_all_mib"] = round(rss_mib(apiserver))
            figures["measured_saving_vs_all_mib"] = figures["rss_all_mib"] - figures["rss_plan_mib"]
            figures["measured_plan_mib"] = figures["rss_plan_mib"] - figures["rss_inactive_mib"]
        except (OSError, subprocess.SubprocessError, RuntimeError, KeyError, ValueError) as exc:
            kept = keep_logs(state, f"mrap-{minor}")
            raise SystemExit(f"bench mrap: {' '.join(str(exc).split())[:300]} (logs in {kept})") from exc
        finally:
            lab.down()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench mrap", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubernetes", default="1.37")
    parser.add_argument("--size", type=int, default=None, help="only the first N CRDs of the set")
    parser.add_argument("--compositions", type=int, default=100)
    parser.add_argument("--kinds", type=int, default=3, help="kinds each Composition composes")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--skip-saving", action="store_true",
                        help="only how fast (no plan applied, no activate-everything: the longest part)")
    parser.add_argument("--output", type=Path, default=None, help="directory of the JSON results")
    args = parser.parse_args(argv)
    options = Options(append_results_md=False)
    isolate_environment()
    if args.output:
        options.output = args.output
    directory = first_crds(args.size) if args.size else unpack_whole_set()
    total = len(crd_files(directory))
    if not wait_for_memory(memory_for(total, total)):
        raise SystemExit("bench mrap: not enough memory available for a lab of this size")
    say(f"mrap bench: Kubernetes {args.kubernetes}, {total} CRDs of {SET} as MRDs, {args.compositions} Compositions")
    figures = measure(args.kubernetes, directory, args.compositions, args.kinds, args.runs, not args.skip_saving)
    result = Result(name="mrap", kubernetes=figures["kubernetes"], sizes=f"{SET}:{args.size or 'all'}",
                    figures=figures)
    say(json.dumps(figures, default=str))
    print(json.dumps({"benchmark": result.name, "result": str(result.write(options))}), flush=True)
    return 0
