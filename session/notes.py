"""A narrator's line kept in a recording: what a narrated session (``crdscope demo``) said, and when.

One record per line said, ``{"type": "note", "data": {"timestamp", "line", "severity", "kind",
"cast"}}``, written beside the samples (readers before it skip a record kind they do not know).
``kind`` says what a replay does with it:

- ``story``: what no sample holds (the stages an install went through, how it was installed): a
  replay says it again when its clock reaches the note's time;
- ``figures``: read from the samples (memory near the cap, the kill, the findings): a replay says it
  again from its own replayed samples, so that what it states is what its screen shows; the recorded
  line stays for comparison;
- ``end``: the story's end (every install ended): a replay says it, then what its samples say then;
- ``live``: true only of the live session (the labs left up): a replay does not say it.

The first note of a story carries its ``cast``: the narrated clusters by name, context, Kubernetes
minor and memory cap, so that a replay names them as the live session did.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

NoteKind = Literal["story", "figures", "end", "live"]
KINDS: tuple[str, ...] = ("story", "figures", "end", "live")


@dataclasses.dataclass(frozen=True)
class CastMember:
    """One narrated cluster: the name the story gives it, its recording's context, its minor and cap."""

    name: str
    context: str
    kubernetes: str
    memory_limit: int = 0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CastMember:
        limit = data.get("memory_limit", 0)
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise ValueError("a cast member's memory_limit is not a whole number")
        return cls(str(data["name"]), str(data.get("context", "")), str(data.get("kubernetes", "")), limit)


@dataclasses.dataclass(frozen=True)
class Note:
    """One line a narrator said at ``timestamp`` (seconds since the epoch)."""

    timestamp: float
    line: str
    severity: str = "information"
    kind: NoteKind = "story"
    cast: tuple[CastMember, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"timestamp": self.timestamp, "line": self.line, "severity": self.severity,
                                "kind": self.kind}
        if self.cast:
            data["cast"] = [member.to_json() for member in self.cast]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Note:
        when, line, kind = data.get("timestamp"), data.get("line"), data.get("kind", "story")
        if not isinstance(when, (int, float)) or isinstance(when, bool):
            raise ValueError("a note without a numeric timestamp")
        if not isinstance(line, str) or kind not in KINDS:
            raise ValueError("a note without a line, or of an unknown kind")
        cast = data.get("cast") or []
        if not isinstance(cast, list) or not all(isinstance(member, dict) for member in cast):
            raise ValueError("a note's cast is not a list of clusters")
        return cls(float(when), line, str(data.get("severity", "information")), kind,
                   tuple(CastMember.from_json(member) for member in cast))
