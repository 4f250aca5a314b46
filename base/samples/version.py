"""The version probe's sample and the records it holds: what every front end reads of it (the probe
that makes it is ``probes/version.py``; readers import the sample from here, never the probe)."""

from __future__ import annotations

import dataclasses

from crdscope.base.samples import Sample

@dataclasses.dataclass(frozen=True, kw_only=True)
class VersionSample(Sample):
    """``GET /version``: the server's build and the wall time of the request."""

    probe = "version"
    short_name = "ver"

    server: str = ""
    git_version: str = ""
    major: str = ""
    minor: str = ""
    platform: str = ""
    go_version: str = ""
    seconds: float = 0.0

    @property
    def kubernetes_minor(self) -> str:
        """``1.37`` (a provider's ``37+`` read as 37); "" while the server has not said."""
        return f"{self.major}.{self.minor.rstrip('+')}" if self.major and self.minor else ""
