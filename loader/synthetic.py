"""``synthetic:N``: CRDs shaped like Crossplane managed resources, with no files needed.

The shape follows the real provider sets in ``../shared/crds`` (measured on
provider-aws, 2,065 CRDs): every service has a cluster-scoped group and a
namespaced ``.m.`` twin (Crossplane v2); kinds per group follow provider-aws's
distribution (mean 5.8, a few groups with ~100 kinds); about a third of the
groups serve a second version (1.35 versions per group); schemas have
``spec.forProvider``/``initProvider``/``status.atProvider``, Crossplane's
standard fields, printer columns, categories and, in about two thirds of the
CRDs, CEL rules for required parameters.

``schema_props`` is the number of properties in ``spec.forProvider``,
counting nested ones (provider-aws: mean 35, median 22);
``initProvider`` repeats them and ``atProvider`` adds ``id``.  The set is a
pure function of (N, seed, schema_props), and ``synthetic:200`` is the first
200 CRDs of ``synthetic:300`` for the same seed.
"""

from __future__ import annotations

import hashlib
import json
import random
from functools import cache
from pathlib import Path
from typing import Any
from collections.abc import Iterator, Mapping

from crdscope.base.errors import ConfigError

from .documents import CRD_API_VERSION, CRD_KIND, Item, Source, document_items

DOMAIN = "synthetic.crdscope.dev"
#: The package NAME of ``synthetic:N`` as a provider (family ``provider-family-synthetic``, members
#: ``provider-synthetic-<service>``), as upstream names theirs.
PROVIDER_NAME = "provider-synthetic"
#: provider-aws: number of API groups having k kinds (cluster-scoped and .m. groups together).
KINDS_PER_GROUP = {1: 64, 2: 61, 3: 51, 4: 36, 5: 14, 6: 24, 7: 26, 8: 18, 9: 6, 10: 6, 11: 8, 12: 6,
                   13: 6, 14: 4, 15: 4, 16: 6, 18: 2, 22: 2, 23: 4, 24: 2, 25: 2, 104: 2}
#: provider-aws: number of groups serving 1, 2 or 3 versions.
VERSIONS_PER_GROUP = {1: 235, 2: 114, 3: 5}
VERSION_NAMES = ("v1beta1", "v1beta2", "v1beta3")
#: Top-level forProvider field types in provider-aws (string, object, bool, array of objects, ...).
FIELD_TYPES = {"string": 9042, "object": 7170, "boolean": 1182, "array-object": 924, "number": 814,
               "array-string": 688}
CEL_SHARE = 1352 / 2065
MAX_SCHEMA_PROPS = 5000

SERVICES = (
    "compute", "storage", "network", "identity", "queue", "stream", "cache", "search", "dns", "cdn",
    "database", "warehouse", "analytics", "ml", "secrets", "keys", "logs", "metrics", "alerts", "mail",
    "notify", "workflow", "batch", "container", "registry", "functions", "gateway", "mesh", "backup",
    "transfer", "directory", "iot", "media", "edge", "ledger", "graph", "quantum", "billing", "audit",
    "config", "deploy", "build", "pipeline", "repo", "catalog", "lake", "glue", "firewall", "vpn", "shield",
)
WORDS = (
    "Instance", "Bucket", "Policy", "Role", "Attachment", "Cluster", "Subnet", "Gateway", "Route", "Table",
    "Key", "Secret", "Queue", "Topic", "Function", "Alias", "Rule", "Group", "User", "Endpoint", "Listener",
    "Target", "Volume", "Snapshot", "Image", "Repository", "Domain", "Record", "Certificate", "Stream",
    "Pipeline", "Job", "Workflow", "Database", "Parameter", "Configuration", "Association", "Permission",
    "Profile", "Template", "Schedule", "Trigger", "Connection", "Account", "Distribution", "Origin",
    "Cache", "Filter", "Metric", "Alarm", "Dashboard", "Environment", "Application", "Deployment",
    "Version", "Layer", "Mount", "Access", "Network", "Peering", "Interface", "Address", "Zone",
    "Resolver", "Link", "Share", "Channel", "Broker", "Index", "Model", "Project", "Space", "Store",
    "Vault", "Webhook", "Authorizer", "Stage", "Integration", "Method", "Plan", "Lifecycle", "Fleet",
)
FIELD_WORDS = (
    "name", "type", "size", "count", "enabled", "arn", "region", "zone", "tags", "policy", "role", "mode",
    "port", "protocol", "timeout", "retention", "encryption", "key", "version", "engine", "class", "tier",
    "subnet", "security", "group", "endpoint", "description", "priority", "weight", "capacity", "limit",
    "schedule", "window", "format", "source", "destination", "target", "path", "prefix", "suffix",
    "bucket", "queue", "topic", "stream", "log", "metric", "alarm", "threshold", "period", "action",
)
SENTENCE_WORDS = (
    "the", "of", "resource", "configuration", "value", "when", "is", "set", "to", "this", "for", "which",
    "will", "be", "used", "by", "provider", "identifier", "must", "one", "specifies", "whether", "and",
    "external", "default", "amount", "each", "managed", "reference", "a", "in", "that", "are",
)


def _weighted(rng: random.Random, table: Mapping[Any, float]) -> Any:
    return rng.choices(list(table), weights=list(table.values()))[0]


def _camel(words: list[str]) -> str:
    return words[0] + "".join(w[:1].upper() + w[1:] for w in words[1:])


class _Schema:
    """Random but deterministic property trees of an exact size."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def description(self) -> str:
        words = self.rng.choices(SENTENCE_WORDS, k=self.rng.randint(8, 30))
        return " ".join(words).capitalize() + "."

    def field_names(self, count: int) -> list[str]:
        names: dict[str, None] = {}  # ordered, with set-speed membership
        while len(names) < count:
            names.setdefault(_camel(self.rng.sample(FIELD_WORDS, self.rng.randint(1, 3))))
        return list(names)

    def properties(self, budget: int, depth: int = 0) -> dict[str, Any]:
        """A ``properties`` map holding exactly ``budget`` properties, nested ones included."""
        result: dict[str, Any] = {}
        names = iter(self.field_names(budget))
        while budget > 0:
            kind = _weighted(self.rng, FIELD_TYPES)
            if kind in ("object", "array-object") and (depth >= 3 or budget < 3):
                kind = "string"
            budget -= 1
            prop: dict[str, Any] = {"description": self.description()}
            if kind in ("object", "array-object"):
                inner_budget = min(budget, self.rng.randint(1, 6))
                budget -= inner_budget
                inner = {"type": "object", "properties": self.properties(inner_budget, depth + 1)}
                if kind == "object":
                    prop.update(inner)
                else:
                    prop.update({"type": "array", "items": inner})
            elif kind == "array-string":
                prop.update({"type": "array", "items": {"type": "string"}})
            elif kind == "string" and self.rng.random() < 0.08:
                prop.update({"type": "object", "additionalProperties": {"type": "string"},
                             "x-kubernetes-map-type": "granular"})
            else:
                prop["type"] = kind
            result[next(names)] = prop
        return result


def _reference(description: str) -> dict[str, Any]:
    policy = {"type": "object", "description": "Policies for referencing.", "properties": {
        "resolution": {"type": "string", "default": "Required", "enum": ["Required", "Optional"]},
        "resolve": {"type": "string", "enum": ["Always", "IfNotPresent"]},
    }}
    return {"type": "object", "description": description, "required": ["name"],
            "properties": {"name": {"type": "string", "description": "Name of the referenced object."},
                           "policy": policy}}


def _conditions() -> dict[str, Any]:
    condition = {"type": "object", "description": "A Condition that may apply to a resource.",
                 "required": ["lastTransitionTime", "reason", "status", "type"],
                 "properties": {
                     "lastTransitionTime": {"type": "string", "format": "date-time"},
                     "message": {"type": "string"}, "observedGeneration": {"type": "integer", "format": "int64"},
                     "reason": {"type": "string"}, "status": {"type": "string"}, "type": {"type": "string"}}}
    return {"type": "array", "description": "Conditions of the resource.", "items": condition,
            "x-kubernetes-list-map-keys": ["type"], "x-kubernetes-list-type": "map"}


def _spec_schema(rng: random.Random, for_provider: dict[str, Any], namespaced: bool) -> dict[str, Any]:
    """``spec`` as upjet writes it: forProvider, initProvider, the policies and references; on some
    CRDs, CEL rules requiring a parameter or two (as upjet's required parameters are)."""
    spec_props: dict[str, Any] = {
        "deletionPolicy": {"type": "string", "default": "Delete", "enum": ["Orphan", "Delete"],
                           "description": "What happens to the external resource on deletion."},
        "forProvider": {"type": "object", "properties": for_provider},
        "initProvider": {"type": "object", "properties": for_provider,
                         "description": "Fields set only when the external resource is created."},
        "managementPolicies": {"type": "array", "default": ["*"],
                               "items": {"type": "string", "enum": ["Observe", "Create", "Update", "Delete",
                                                                    "LateInitialize", "*"]}},
        "providerConfigRef": _reference("How the provider is configured for this resource."),
        "writeConnectionSecretToRef": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "description": "Name of the secret."}}},
    }
    if not namespaced:
        spec_props["writeConnectionSecretToRef"]["properties"]["namespace"] = {"type": "string"}
        spec_props["writeConnectionSecretToRef"]["required"] = ["name", "namespace"]
    spec_schema: dict[str, Any] = {"type": "object", "required": ["forProvider"], "properties": spec_props}
    if rng.random() < CEL_SHARE and for_provider:
        required = rng.sample(sorted(for_provider), min(len(for_provider), rng.randint(1, 2)))
        spec_schema["x-kubernetes-validations"] = [
            {"message": f"spec.forProvider.{name} is a required parameter",
             "rule": ("!('*' in self.managementPolicies || 'Create' in self.managementPolicies || "
                      f"'Update' in self.managementPolicies) || has(self.forProvider.{name}) || "
                      f"(has(self.initProvider) && has(self.initProvider.{name}))")}
            for name in required
        ]
    return spec_schema


def _printer_columns() -> list[dict[str, Any]]:
    """The columns ``kubectl get`` shows for a Crossplane managed resource."""
    return [
        {"name": "SYNCED", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Synced')].status"},
        {"name": "READY", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Ready')].status"},
        {"name": "EXTERNAL-NAME", "type": "string", "jsonPath": ".metadata.annotations.crossplane\\.io/external-name"},
        {"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]


def _crd(rng: random.Random, service: str, group: str, kind: str, versions: list[str],
         namespaced: bool, schema_props: int) -> dict[str, Any]:
    schema = _Schema(rng)
    for_provider = schema.properties(schema_props)
    at_provider = {**for_provider, "id": {"type": "string"}}
    open_api = {"type": "object", "description": f"{kind} is a synthetic managed resource of {service}.",
                "required": ["spec"], "properties": {
                    "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                    "spec": _spec_schema(rng, for_provider, namespaced),
                    "status": {"type": "object", "properties": {
                        "atProvider": {"type": "object", "properties": at_provider},
                        "conditions": _conditions(),
                        "observedGeneration": {"type": "integer", "format": "int64"}}}}}
    columns = _printer_columns()
    plural = kind.lower() + ("es" if kind.endswith(("s", "x", "ch", "sh")) else "s")
    return {
        "apiVersion": CRD_API_VERSION,
        "kind": CRD_KIND,
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower(),
                      "categories": ["crossplane", "managed", "synthetic"]},
            "scope": "Namespaced" if namespaced else "Cluster",
            "versions": [
                {"name": version, "served": True, "storage": index == len(versions) - 1,
                 "additionalPrinterColumns": columns, "subresources": {"status": {}},
                 "schema": {"openAPIV3Schema": open_api}}
                for index, version in enumerate(versions)
            ],
        },
    }


def synthetic_documents(count: int, *, seed: int = 1, schema_props: int = 40) -> Iterator[dict[str, Any]]:
    """The ``count`` CRD documents of ``synthetic:count`` (as parsed YAML would give them)."""
    rng = random.Random(seed)
    made = 0
    service_index = 0
    while made < count:
        base = SERVICES[service_index % len(SERVICES)]
        service = base if service_index < len(SERVICES) else f"{base}{service_index // len(SERVICES) + 1}"
        service_index += 1
        size = _weighted(rng, KINDS_PER_GROUP)
        version_count = _weighted(rng, VERSIONS_PER_GROUP)
        kinds: list[str] = []
        while len(kinds) < size:
            kind = "".join(rng.sample(WORDS, rng.choice((1, 2, 2, 3))))
            if kind not in kinds:
                kinds.append(kind)
        # Which kinds serve the newer versions: at least the first, about half of the others.
        newer = [index == 0 or rng.random() < 0.5 for index in range(size)]
        seeds = [rng.getrandbits(64) for _ in range(size)]
        for namespaced in (False, True):
            group = f"{service}.m.{DOMAIN}" if namespaced else f"{service}.{DOMAIN}"
            for index, kind in enumerate(kinds):
                if made >= count:
                    return
                versions = list(VERSION_NAMES[:version_count] if newer[index] else VERSION_NAMES[:1])
                # Each CRD draws from its own generator: the twin groups get identical schemas,
                # and a CRD does not change when ``count`` does.
                yield _crd(random.Random(seeds[index]), service, group, kind, versions, namespaced, schema_props)
                made += 1


def is_synthetic(spec: str) -> bool:
    """Whether ``spec`` names this source (``synthetic:N``, or ``synthetic`` alone)."""
    return spec == "synthetic" or spec.startswith("synthetic:")


@cache
def generator_digest() -> str:
    """A digest of this module's code: what ``synthetic:N`` generates for a seed changes only with it
    (a cache of built packages keyed on N and the seed goes stale when the code changes)."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


class SyntheticSource(Source):
    """``synthetic:N`` as a source (generated in the engine's worker thread, one CRD at a time)."""

    def __init__(self, count: int, *, seed: int = 1, schema_props: int = 40) -> None:
        super().__init__()
        if count < 1:
            raise ConfigError(f"synthetic:{count}: the count must be at least 1")
        if not 0 <= schema_props <= MAX_SCHEMA_PROPS:
            raise ConfigError(f"--schema-props must be between 0 and {MAX_SCHEMA_PROPS}, not {schema_props}")
        self.count = count
        self.seed = seed
        self.schema_props = schema_props
        self.spec = f"synthetic:{count}"
        self.key = f"synthetic:{count}:seed={seed}:props={schema_props}"
        self.estimate = count

    @classmethod
    def parse(cls, spec: str, *, seed: int = 1, schema_props: int = 40) -> SyntheticSource:
        """``synthetic:N`` (``synthetic`` alone means 300)."""
        _, _, number = spec.partition(":")
        try:
            count = int(number) if number else 300
        except ValueError:
            raise ConfigError(f"{spec}: expected synthetic:N with N a whole number") from None
        return cls(count, seed=seed, schema_props=schema_props)

    def items(self) -> Iterator[Item]:
        for index, document in enumerate(synthetic_documents(self.count, seed=self.seed,
                                                             schema_props=self.schema_props)):
            yield from document_items(document, f"{self.spec}#{index + 1}")


def to_json(document: dict[str, Any]) -> str:
    """One synthetic document as JSON (for ``kubectl apply -f`` comparisons in tests and benchmarks)."""
    return json.dumps(document)
