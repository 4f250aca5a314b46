"""The MRAP view of provider runtimes: which runtime Crossplane v2.4 keeps scaled to zero the plan wakes."""

from __future__ import annotations

from crdscope.base.activation import MRD
from crdscope.cli.mrap import to_json, to_text, wake_lines
from crdscope.costmodel.planner import Platform, ProviderRuntime, _revision_runtimes, price, wakes
from crdscope.costmodel.planner import report_of
from tests.unit.test_findings_crossplane import composing

SQS = ("queues.sqs.aws.upbound.io", "queuepolicies.sqs.aws.upbound.io")
SNS = ("topics.sns.aws.upbound.io",)


def _platform(runtimes: tuple[ProviderRuntime, ...] | None, minor: str | None = "1.37") -> Platform:
    mrds = tuple(MRD(name, kind=name.split(".")[0][:-1].capitalize()) for name in (*SQS, *SNS))
    return Platform((composing("Queue"),), mrds, (), (), objects_known=False, described="test", minor=minor,
                    runtimes=runtimes)


def _revision(name: str, provider: str, mrds: tuple[str, ...], runtime_active: tuple[str, str] | None,
              safe_start: bool = True, state: str = "Active") -> dict:
    conditions = [] if runtime_active is None else [
        {"type": "RuntimeActive", "status": runtime_active[0], "reason": runtime_active[1]}]
    return {"metadata": {"name": name, "labels": {"pkg.crossplane.io/package": provider}},
            "spec": {"desiredState": state, "revision": 1},
            "status": {"conditions": conditions, "capabilities": ["safe-start"] if safe_start else [],
                       "objectRefs": [{"kind": "ManagedResourceDefinition", "name": n} for n in mrds]}}


def test_revisions_awaiting_activation_are_read_from_runtime_active():
    runtimes = _revision_runtimes([
        _revision("sqs-r1", "provider-aws-sqs", SQS, ("False", "AwaitingActivation")),
        _revision("sns-r1", "provider-aws-sns", SNS, ("True", "ActiveRuntime")),
        _revision("old-r1", "provider-old", SNS, None),  # Crossplane before v2.4: no condition
        _revision("eager-r1", "provider-eager", SNS, None, safe_start=False),  # never scaled to zero
        _revision("sqs-r0", "provider-aws-sqs", SQS, ("False", "AwaitingActivation"), state="Inactive"),
        "not an object"])
    assert [(r.provider, r.revision, r.awaiting) for r in runtimes] == [
        ("provider-aws-sns", "sns-r1", False), ("provider-aws-sqs", "sqs-r1", True), ("provider-old", "old-r1", False)]
    assert runtimes[1].mrds == SQS


def test_the_plan_wakes_the_runtime_whose_kinds_it_activates_and_says_which_stay_asleep():
    runtimes = (ProviderRuntime("provider-aws-sqs", "sqs-r1", SQS, True),
                ProviderRuntime("provider-aws-sns", "sns-r1", SNS, True),
                ProviderRuntime("provider-running", "run-r1", SNS, False))
    platform = _platform(runtimes)
    report = report_of(platform)
    assert [n.mrd for n in report.needed] == ["queues.sqs.aws.upbound.io"]
    found = {w.provider: w for w in wakes(report, platform)}
    assert set(found) == {"provider-aws-sqs", "provider-aws-sns"}  # a running runtime is not woken
    assert (found["provider-aws-sqs"].activates, found["provider-aws-sqs"].mrds, found["provider-aws-sqs"].wakes) == (
        1, 2, True)
    assert found["provider-aws-sns"].wakes is False
    lines = wake_lines(platform, report)
    assert lines[0].startswith("wakes provider-aws-sqs (sqs-r1): activates 1 of its 2 MRDs")
    assert lines[1].startswith("leaves provider-aws-sns (sns-r1) scaled to zero")
    text = to_text(platform, report, price(report, platform))
    assert "Provider runtimes awaiting activation:" in text and "wakes provider-aws-sqs" in text
    data = to_json(platform, report, price(report, platform))
    assert [(w["provider"], w["wakes"]) for w in data["runtimes_awaiting"]] == [
        ("provider-aws-sqs", True), ("provider-aws-sns", False)]


def test_nothing_awaiting_or_not_read_is_said_plainly_or_not_at_all():
    platform = _platform((ProviderRuntime("provider-running", "run-r1", SNS, False),))
    report = report_of(platform)
    assert wake_lines(platform, report) == ["no provider runtime is scaled to zero awaiting activation"]
    unread = _platform(None)
    assert wake_lines(unread, report_of(unread)) == []
    assert to_json(unread, report_of(unread), price(report_of(unread), unread))["runtimes_awaiting"] is None
    # From files: what Crossplane v2.4+ would do, said as such.
    files = _platform((ProviderRuntime("provider-aws-sqs", "", SQS, True),), minor=None)
    lines = wake_lines(files, report_of(files))
    assert lines[0].startswith("wakes provider-aws-sqs: activates 1 of its 2 MRDs") and "v2.4+" in lines[-1]


def test_safe_start_packages_among_files_await_activation_until_one_of_their_kinds_is_active():
    from crdscope.costmodel.planner import _package_runtimes

    crds = {name: ({}, "sqs.xpkg") for name in SQS} | {name: ({}, "sns.xpkg") for name in SNS} | {
        "eager.example.io": ({}, "eager.xpkg"), "loose.example.io": ({}, "")}
    mrds = [MRD(SQS[0], state="Active"), MRD(SQS[1]), MRD(SNS[0]), MRD("eager.example.io", state="Active")]
    runtimes = _package_runtimes(crds, mrds, {"sqs.xpkg": True, "sns.xpkg": True, "eager.xpkg": False},
                                 {"sqs.xpkg": "provider-aws-sqs", "sns.xpkg": "provider-aws-sns"})
    assert [(r.provider, r.mrds, r.awaiting) for r in runtimes] == [
        ("provider-aws-sns", SNS, True), ("provider-aws-sqs", tuple(sorted(SQS)), False)]
