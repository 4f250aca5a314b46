"""``crdscope doctor``: run the probes for a short while and print what is wrong, for an incident channel.

Exit code by the worst finding: 0 nothing (or information only), 1 a warning,
2 a critical finding; 3 when the server answered nothing at all in the time given
(down, stopped, wrong port), which says so plainly instead of asking for a longer
``--duration``.  Output as text (default), Markdown (``--format md``) or one JSON
object (``--json``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
from typing import TYPE_CHECKING, Any

from crdscope.base.samples.attribution import AttributionSample, attribution_summary, costliest_groups
from crdscope.findings.engine import CHECKS, check_silences
from crdscope.findings.kubectl import KubectlMeasurement
from crdscope.findings.model import Finding, Severity, format_duration, most_severe_first, worst_rank
from crdscope.base.errors import ConfigError

from .core import Runs, WatchCore, run_for
from .recorder import ClusterInfo

if TYPE_CHECKING:  # the live wiring (probes, the connection) is imported when the doctor starts
    from crdscope.base.settings import Settings
    from crdscope.connection.cluster import Cluster

FORMATS = ("text", "md", "json")
#: The exit code of a server that answered nothing (the README's "cluster unreachable").
UNANSWERED_EXIT = 3
#: The one /version request that names the cluster must not hold the doctor up.
DESCRIBE_TIMEOUT_SECONDS = 5.0


@dataclasses.dataclass
class Diagnosis:
    """What the doctor saw: the cluster, how long it watched, the findings open at the end."""

    cluster: ClusterInfo
    seconds: float
    findings: list[Finding]
    samples: int
    kubectl: str
    #: Probes that delivered at least one good sample (what the checks could judge).
    probes_seen: frozenset[str] = frozenset()
    #: What the doctor itself sent the server (requests, bytes received), kubectl's measurement excluded.
    own_requests: int = 0
    own_bytes: int = 0
    #: Requests that never reached the server (refused, no TLS handshake): not load, not in ``own_requests``.
    unsent: int = 0
    #: Why the server answered nothing when it did not ("" when no failure said why; None: it answered).
    unanswered: str | None = None
    #: The cost model's attribution of the memory to the cluster's CRDs and MRDs (None: nothing priced).
    attribution: AttributionSample | None = None

    @property
    def memory(self) -> str:
        """One line: what the cost model puts on the CRDs (by their schemas) and the MRDs, and the
        costliest groups ("" when nothing was priced)."""
        return memory_line(self.attribution)

    @property
    def own_load(self) -> str:
        """One line: what checking cost the server."""
        rate = self.own_requests / self.seconds if self.seconds > 0 else 0.0
        unsent = (f"; {self.unsent:,} requests that never reached it (no connection) are not counted"
                  if self.unsent else "")
        return (f"crdscope's own load on the server: {self.own_requests:,} requests ({rate:.1f}/s), "
                f"{self.own_bytes / 1024:,.0f} KiB received in {format_duration(self.seconds)}{unsent}")

    @property
    def no_answer(self) -> str:
        """One line when the server answered nothing (else empty)."""
        if self.unanswered is None:
            return ""
        why = f" ({self.unanswered})" if self.unanswered else ""
        return (f"The API server at {self.cluster.server} did not answer in {format_duration(self.seconds)}{why}: "
                "it is down, stopped or not at that address; nothing could be checked.")

    @property
    def checked(self) -> list[str]:
        """The checks whose every declared probe delivered a good sample."""
        return [check.what_it_checks for check in CHECKS if not check.missing(self.probes_seen)]

    @property
    def not_checked(self) -> list[str]:
        """The others, each with why (a probe it needs never delivered a good sample in the time given)."""
        if self.unanswered is not None:  # one reason for all of them, said once (see ``no_answer``)
            return [check.what_it_checks for check in CHECKS if check.missing(self.probes_seen)]
        return [f"{check.what_it_checks} (no good {' or '.join(missing)} sample in {format_duration(self.seconds)}: "
                "try a longer --duration)" for check in CHECKS if (missing := check.missing(self.probes_seen))]

    @property
    def exit_code(self) -> int:
        """0 none or info only, 1 a warning, 2 a critical finding; 3 the server answered nothing.
        An accepted finding (``[[silence]]``) does not count."""
        if self.unanswered is not None:
            return UNANSWERED_EXIT
        return worst_rank(self.findings)

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster.to_json(), "duration_seconds": round(self.seconds, 1),
                "samples": self.samples, "kubectl": self.kubectl, "exit_code": self.exit_code,
                "findings": [f.to_json() for f in self.findings], "checked": self.checked,
                "not_checked": self.not_checked, "answered": self.unanswered is None,
                "unanswered": self.unanswered, "attribution": attribution_json(self.attribution),
                "own_load": {"requests": self.own_requests, "bytes": self.own_bytes, "unsent": self.unsent}}


def memory_line(attribution: AttributionSample | None) -> str:
    """``Memory by the cost model: CRDs ~ ... ; costliest groups: ...`` ("" while nothing is priced)."""
    summary = attribution_summary(attribution)
    return f"Memory by the cost model: {summary}" if summary else ""


#: The groups ``doctor --json`` names, costliest first (the exporter has every one).
JSON_GROUPS = 10


def attribution_json(attribution: AttributionSample | None) -> dict[str, Any] | None:
    """The attribution's figures for ``doctor --json``: the sample's, with its costliest groups only."""
    if attribution is None or attribution.crd_memory_bytes is None:
        return None
    data = attribution.to_json()
    data["memory_bytes"] = dict(costliest_groups(attribution, JSON_GROUPS))
    return data


def run_doctor(kubeconfig: str | None, context: str | None, seconds: float,
               memory_limit: int | None = None, *, openapi_v2: bool = False) -> Diagnosis:
    """Watch the cluster for ``seconds`` and return the findings open at the end.

    ``memory_limit`` (bytes) is the API server's limit when the caller knows it; a
    capped crdscope lab's cap is found without it.
    """
    from crdscope.connection.cluster import Cluster
    from crdscope.base.settings import load_settings, with_openapi_v2

    settings = with_openapi_v2(load_settings(), openapi_v2)
    check_silences(settings.silences)
    cluster = Cluster.connect(kubeconfig, context)
    return asyncio.run(_diagnose(cluster, settings, seconds, memory_limit))


async def _diagnose(cluster: Cluster, settings: Settings, seconds: float,
                    memory_limit: int | None = None) -> Diagnosis:
    from crdscope.connection.cluster import first_contact

    from .live import open_live_core
    from .recorder import describe_cluster

    measuring: asyncio.Task[KubectlMeasurement] | None = None
    try:
        await first_contact(cluster)
        try:
            info = await asyncio.wait_for(describe_cluster(cluster), DESCRIBE_TIMEOUT_SECONDS)
        except TimeoutError:
            info = ClusterInfo(server=cluster.server, context=cluster.context)
        live = open_live_core(cluster, settings, memory_limit=memory_limit)
        local = await live.core.learn_local_kubectl()
        # The local kubectl's cold discovery, for real, beside the probes (bounded by the duration).
        measuring = asyncio.create_task(measure_kubectl(cluster, local.path, seconds)) if local else None
        diagnosis = await examine(live.core, info, seconds, measuring, running=live)
        traffic = cluster.traffic
        own = traffic.total()
        unanswered = None if traffic.answered else _why_unanswered(live.core)
        return dataclasses.replace(diagnosis, own_requests=own.requests, own_bytes=own.bytes,
                                   unsent=traffic.unsent, unanswered=unanswered)
    finally:
        if measuring is not None and not measuring.done():
            measuring.cancel()  # its kubectl is killed on the way out
            with contextlib.suppress(BaseException):
                await measuring
        await cluster.aclose()


def _why_unanswered(core: WatchCore) -> str:
    """Why the server answered nothing, in a few words: a probe's last error names the cause ("" when
    none failed yet: every request still waiting, as on a stopped server)."""
    errors = [h.last_error for _, h in sorted(core.store.health().items()) if h.last_error]
    reason = next((e for e in errors if "refused" in e), errors[0] if errors else "")
    return reason.split(": ")[-1]  # "cannot reach https://...: connection refused": its last part


async def examine(core: WatchCore, info: ClusterInfo, seconds: float,
                  measuring: asyncio.Task[KubectlMeasurement] | None = None, *,
                  running: Runs | None = None) -> Diagnosis:
    """Run ``core``'s source (or ``running``: the live core around it) for ``seconds`` (or until a
    recording ends) and diagnose what it saw.

    ``measuring`` is the local kubectl's real cold discovery, timed beside the probes: its
    figure replaces the model's before the last evaluation.
    """
    started = time.monotonic()
    _, failure = await run_for(running or core, seconds)
    if failure is not None:
        raise failure
    if measuring is not None:
        core.findings.observations.kubectl_measured = await measuring
        core.evaluate(time.time())
    store = core.store
    seen = frozenset(name for name in store.health() if store.last_good(name) is not None)
    local = core.kubectl
    return Diagnosis(cluster=info, seconds=time.monotonic() - started, findings=core.open_findings(),
                     samples=core.samples, kubectl=local.describe() if local else "not found on PATH",
                     probes_seen=seen, attribution=store.last_good_of(AttributionSample))


async def measure_kubectl(cluster: Cluster, kubectl: str, seconds: float) -> KubectlMeasurement:
    """kubectl's ``api-resources`` with an empty cache dir, timed, at most ``seconds`` (then stopped)."""
    from crdscope.probes.discovery_kubectl import kubectl_cold_seconds

    budget = max(1.0, seconds)
    try:
        took, error = await kubectl_cold_seconds(cluster, kubectl, budget)
    except TimeoutError:
        return KubectlMeasurement(unfinished_after=budget)
    return KubectlMeasurement(seconds=took, error=error)


def render(diagnosis: Diagnosis, fmt: str) -> str:
    """The diagnosis as text, Markdown or JSON."""
    if fmt == "json":
        return json.dumps(diagnosis.to_json(), indent=2)
    if fmt not in FORMATS:
        raise ConfigError(f"--format '{fmt}' is not one of {', '.join(FORMATS)}")
    md = fmt == "md"
    info = diagnosis.cluster
    head = (f"crdscope doctor: {info.server} ({info.kubernetes_version or 'version unknown'}, context "
            f"{info.context}), watched {format_duration(diagnosis.seconds)}; local kubectl: {diagnosis.kubectl}")
    lines = [f"### {head}" if md else head, ""]
    if diagnosis.no_answer:
        lines += [f"**{diagnosis.no_answer}**" if md else diagnosis.no_answer, ""]
    findings = most_severe_first(diagnosis.findings)
    why = " (the server did not answer)" if diagnosis.no_answer else ""
    not_checked = ["", f"Not checked{why}: " + "; ".join(diagnosis.not_checked) + "."] if diagnosis.not_checked \
        else []
    not_checked += [diagnosis.memory] if diagnosis.memory else []
    not_checked.append(diagnosis.own_load)
    if not findings:
        if diagnosis.no_answer:  # "nothing found" would read as "all is well"
            lines.pop()  # the blank line after it: "Not checked" brings its own
        else:
            lines.append("Nothing found. Checked: " + ("; ".join(diagnosis.checked) or "nothing") + ".")
        return "\n".join(lines + not_checked)
    now = time.time()
    for finding in findings:
        since = time.strftime("%H:%M:%S", time.localtime(finding.since))
        label = finding.severity.value.upper() + (" (ACCEPTED)" if finding.accepted is not None else "")
        title = f"{label}: {finding.title} (since {since}, {format_duration(max(0.0, now - finding.since))})"
        lines.append(f"**{title}**" if md else title)
        bullet = "- " if md else "  "
        if finding.accepted is not None:
            lines.append(f"{bullet}{finding.accepted_note} (not counted in the exit code)")
        lines += [f"{bullet}evidence: {e}" for e in finding.evidence]
        lines += [f"{bullet}likely cause: {finding.cause}", f"{bullet}what to do: {finding.remedy}", ""]
    lines.append(summary_line(findings) + f"; exit {diagnosis.exit_code}")  # exit: the worst that pages, or 3
    return "\n".join(lines + not_checked)


def summary_line(findings: list[Finding]) -> str:
    """``1 critical (accepted), 2 warning``: open findings per severity, those accepted said so."""
    parts = []
    for severity in Severity:
        of = [f for f in findings if f.severity is severity]
        accepted = sum(1 for f in of if f.accepted is not None)
        note = "" if not accepted else " (accepted)" if accepted == len(of) else f" ({accepted} accepted)"
        parts += [f"{len(of)} {severity.value}{note}"] if of else []
    return ", ".join(parts)
