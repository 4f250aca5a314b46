"""Benchmark: ``crdscope doctor`` on a lab holding the AWS set, checked against kubectl.

One shared lab per size (``bench.labs``).  On it:

* ``crdscope doctor --duration 30s --json`` once, as a person pastes it into an
  incident channel: its wall time, exit code, and the findings it reports;
* the kubectl finding's prediction ("next cold discovery about N s") against
  ``kubectl api-resources`` with a fresh ``--cache-dir``, timed ``runs`` times in
  the same run: the ratio predicted / measured says whether the estimate holds;
* the unused-CRD finding's count against the CRDs kubectl lists (none of the
  set's kinds has an object in a fresh lab, so every CRD of the set is unused).

Goals: the kubectl prediction within 0.5x-2x of the measured median; the
unused count equal to kubectl's CRD count; the exit code is the worst severity.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from .common import BenchError, Options, Result, run_timed, size_label, stats
from .discovery import Contenders, crdscope_command
from .labs import each_shared_lab, kubectl

SET = "provider-aws"
DOCTOR_SECONDS = 30
#: A smoke run's doctor (50 CRDs: too few for the kubectl and unused-CRD findings; their goals are left out).
QUICK_DOCTOR_SECONDS = 8
RANK = {"info": 0, "warning": 1, "critical": 2}


def predicted_seconds(title: str) -> float | None:
    """The kubectl finding's "next cold discovery about 1.2 s" (or ms) in seconds."""
    found = re.search(r"next cold discovery about ([\d.,]+) ?(ms|s)\b", title)
    if not found:
        return None
    value = float(found.group(1).replace(",", ""))
    return value / 1000 if found.group(2) == "ms" else value


def run(options: Options) -> Iterator[Result]:
    for size, state, total in each_shared_lab(SET, options.chosen_sizes(), "doctor"):
        duration = QUICK_DOCTOR_SECONDS if options.quick else DOCTOR_SECONDS
        argv = [*crdscope_command(), "doctor", "--duration", f"{duration}s", "--json",
                "--kubeconfig", state.kubeconfig, "--context", state.admin_context]
        seconds, done = run_timed(argv, timeout=duration + 600, check=False)  # exits 1/2 by severity
        try:
            report = json.loads(done.stdout)
        except ValueError:
            raise BenchError(f"doctor printed no JSON (exit {done.returncode}): {done.stderr.strip()[:200]}") from None
        findings = {f["id"]: f for f in report["findings"]}
        kinds = {f["id"].split(":")[0]: f for f in report["findings"]}
        contenders = Contenders(state.kubeconfig)
        cold = [contenders.kubectl_cold() for _ in range(max(3, options.runs))]
        crds = len(json.loads(kubectl(state, "get", "crd", "-o", "json").stdout)["items"])
        figures: dict = {
            "doctor_wall_s": seconds,
            "exit_code": done.returncode,
            "findings": {fid: f"{f['severity']}: {f['title']}" for fid, f in findings.items()},
            "kubectl_cold_s": stats(cold),
            "crds_kubectl": crds,
        }
        result = Result("doctor", state.kubernetes_version, size_label(SET, size, total), figures)
        worst = max((RANK[f["severity"]] for f in report["findings"]), default=0)
        result.goals["exit code = worst severity"] = done.returncode == worst
        kubectl_finding = kinds.get("kubectl-discovery")
        predicted = predicted_seconds(kubectl_finding["title"]) if kubectl_finding else None
        median = stats(cold)["median"]
        figures["kubectl_predicted_s"] = predicted
        figures["predicted_vs_measured"] = predicted / median if predicted and median else None
        # A goal whose finding is absent (a small lab has neither) is left out, with a note.
        if predicted is not None:
            result.goals["kubectl prediction within 0.5x-2x of kubectl measured"] = 0.5 <= predicted / median <= 2.0
        else:
            result.notes.append("no kubectl finding (the local kubectl could not be read, or discovery is small)")
        unused = kinds.get("unused-crds")
        counted = re.search(r"= ([\d,]+) of health.crds = ([\d,]+)", " ".join(unused["evidence"])) if unused else None
        figures["unused_crds"] = counted.group(0) if counted else None
        if counted is not None:
            result.goals["unused CRDs = kubectl's CRD count"] = int(counted.group(1).replace(",", "")) == crds
        else:
            result.notes.append("no unused-CRD finding (fewer than 100 CRDs, or most have objects)")
        yield result
