"""The header's statement of which version's behaviour applies (from the probes' own samples)."""

from __future__ import annotations

from crdscope.base.samples.discovery import DiscoverySample
from crdscope.base.samples.throttling import ThrottlingSample
from crdscope.tui.header import version_behaviour


def test_a_current_server_needs_no_statement():
    assert version_behaviour(DiscoverySample(format="v2"), ThrottlingSample(flowcontrol_api="v1")) == ""
    assert version_behaviour(None, None) == ""


def test_an_old_server_says_legacy_discovery_with_the_reason_and_the_apf_version():
    reason = "/api and /apis answered plain JSON (no aggregated discovery)"
    said = version_behaviour(DiscoverySample(format="legacy", fallback_reason=reason),
                             ThrottlingSample(flowcontrol_api="v1beta3"))
    assert said == f"discovery: legacy only: {reason} · APF v1beta3"


def test_beta_aggregated_discovery_is_named():
    assert version_behaviour(DiscoverySample(format="v2beta1"), None) == "discovery: aggregated v2beta1 (beta)"
