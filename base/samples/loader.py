"""The loader's sample: one load run's progress, in one shape for the TUI, the recorder, the CLI and
``--json`` (the loader reports it; every front end reads it from here)."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, get_args

from crdscope.base.samples import Sample

#: Where a load run is: idle (not started), running, paused (sending held), stopping (in-flight
#: applies finishing), then stopped (ended early: stop, a fatal error) or done (everything settled).
LoaderState = Literal["idle", "running", "paused", "stopping", "stopped", "done"]


#: ``steady`` drips through a token bucket; ``burst`` sends as fast as the concurrency allows.
Profile = Literal["steady", "burst"]


@dataclasses.dataclass(frozen=True)
class ItemProblem:
    """One item of the source that was not applied, and why (one line)."""

    name: str
    reason: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoaderSample(Sample):
    """Progress of one load run.

    Every item of the source ends in exactly one of created, updated, skipped,
    failed; until then it is pending, so ``requested == created + updated +
    skipped + failed + pending`` at every moment.  The counts cover the whole
    run, including earlier attempts of a run that was stopped and started again
    (``resumed`` of them were finished by those attempts and not sent again);
    ``sent``, the rate and the times cover this attempt.
    """

    probe = "loader"
    short_name = "load"

    source: str = ""
    run_id: str = ""
    state: LoaderState = "idle"
    profile: Profile = "steady"
    #: The configured pace (None: unlimited, the burst profile) and in-flight cap.
    rate_limit_per_s: float | None = None
    concurrency: int = 0
    #: Items of the source (CRDs and unreadable entries), exact once the source is read.
    requested: int = 0
    source_read: bool = False
    #: Apply requests sent by this attempt (retries not counted).
    sent: int = 0
    #: CRDs that did not exist and this run created.
    created: int = 0
    #: CRDs that already carried crdscope's label and were applied again.
    updated: int = 0
    #: Of created + updated, those the server reports Established.
    established: int = 0
    #: Names taken by a CRD crdscope does not manage, or repeated within the source.
    skipped: int = 0
    #: Unreadable entries, invalid CRDs, server rejections, CRDs never Established.
    failed: int = 0
    pending: int = 0
    #: Finished by an earlier attempt of this run (counted above, not sent again).
    resumed: int = 0
    #: Documents of the source that are not CRDs (ignored, not part of ``requested``).
    not_crds: int = 0
    #: CRDs Established by this attempt per second of it.
    crds_per_second: float = 0.0
    #: None until a rate has been observed.
    eta_seconds: float | None = None
    elapsed_seconds: float = 0.0
    #: Time spent waiting for crdscope's own token bucket (client-side throttling).
    limiter_waited_seconds: float = 0.0
    #: Applies sent again after a 429 (after its Retry-After), a 5xx, or a transport error.
    retries_429: int = 0
    retries_5xx: int = 0
    retries_transport: int = 0
    failures: tuple[ItemProblem, ...] = ()
    skips: tuple[ItemProblem, ...] = ()

    @property
    def finished(self) -> bool:
        """True once the run ended (done or stopped)."""
        return self.state in ("stopped", "done")

    def summary(self) -> dict[str, Any]:
        """The CLI's ``--json`` object: every field, plus ``seconds`` (the attempt's wall time)."""
        data = self.to_json()
        data["seconds"] = data["elapsed_seconds"]
        return data


#: Every state and profile a loader run can be in, in order.
STATES: tuple[LoaderState, ...] = get_args(LoaderState)
PROFILES: tuple[Profile, ...] = get_args(Profile)
