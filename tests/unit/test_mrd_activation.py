"""``estimate --activate``: which MRDs an MRAP pattern would activate, priced from their own specs."""

from __future__ import annotations

from crdscope.costmodel.features import features_of_spec
from crdscope.costmodel.mrds import matches, select


def _mrd(name: str, state: str = "Inactive", properties: int = 3) -> dict:
    plural, group = name.split(".", 1)
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(properties)}}
    return {"metadata": {"name": name},
            "spec": {"group": group, "names": {"plural": plural, "kind": plural.title(), "singular": plural},
                     "scope": "Cluster", "state": state, "connectionDetails": {"enabled": False},
                     "versions": [{"name": "v1beta1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}}]}}


def test_patterns_match_like_an_mrap():
    assert matches("queues.sqs.aws.upbound.io", ("*.sqs.aws.upbound.io",))
    assert matches("queues.sqs.aws.upbound.io", ("queues.sqs.aws.upbound.io",))
    assert not matches("queues.sqs.aws.upbound.io", ("*.sns.aws.upbound.io",))
    assert not matches("queues.sqs.aws.upbound.io", ("Queues.sqs.aws.upbound.io",))  # case matters


def test_only_inactive_matching_mrds_are_priced_as_the_crds_they_become():
    mrds = [_mrd("queues.sqs.aws.upbound.io", properties=40), _mrd("queuepolicies.sqs.aws.upbound.io"),
            _mrd("topics.sns.aws.upbound.io"), _mrd("providerconfigs.aws.upbound.io", state="Active")]
    chosen = select(mrds, ("*.sqs.aws.upbound.io", "*.aws.upbound.io"))
    assert chosen.names == ("queuepolicies.sqs.aws.upbound.io", "queues.sqs.aws.upbound.io",
                            "topics.sns.aws.upbound.io")
    assert chosen.already_active == ("providerconfigs.aws.upbound.io",)
    assert chosen.mrds_total == 4
    queues = next(c for c in chosen.crds if c.name.startswith("queues."))
    # The MRD's own schema, without Crossplane's fields: the same features as the CRD itself.
    spec = dict(mrds[0]["spec"])
    spec.pop("state")
    spec.pop("connectionDetails")
    assert queues == features_of_spec("queues.sqs.aws.upbound.io", spec)
    assert queues.group_versions == ("sqs.aws.upbound.io/v1beta1",)


def test_nothing_matches():
    assert select([_mrd("topics.sns.aws.upbound.io")], ("*.ec2.aws.upbound.io",)).crds == ()
