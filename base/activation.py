"""What a Crossplane platform needs activated: the kinds its Compositions compose, against its MRDs and MRAPs.

Pure rules, no I/O: :mod:`costmodel.planner` reads the objects (from a cluster or from files) and
prices the plan, :mod:`connection.crossplane_read` reads the Compositions for the monitor, and the
findings judge what this module finds.  The facts it rests on (``../shared/docs/crossplane-facts.md``):

- an MRAP's ``spec.activate`` entries match MRD names (``<plural>.<group>``) with Go's
  ``filepath.Match``; a singular, a kind or a malformed pattern matches nothing, silently;
- a Composition (pipeline mode) composes what its steps' inputs name: function-patch-and-transform's
  ``resources[].base``, function-go-templating's inline template documents; other functions' inputs
  count where an ``apiVersion``/``kind`` pair names an MRD;
- narrowing an MRAP deactivates nothing; a kind whose MRD is Inactive has no CRD, so an XR composing
  it fails with "no matches for kind".

An MRD's kind is known where its CRD or its spec was read (the CRD watch, a package's CRDs); where
only its name is known (a cluster's MRD Table), a composed kind is matched to the MRD of its group
whose plural is one of the plural forms Kubernetes' generators give that kind (:func:`plural_forms`:
every one of the 2,882 AWS and GCP provider CRDs in ``../shared`` resolves so).
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal

from .globs import go_match, valid_pattern

MRAP_API_VERSION = "apiextensions.crossplane.io/v1alpha1"
MRAP_KIND = "ManagedResourceActivationPolicy"
COMPOSITION_KIND = "Composition"
#: The MRAP ``--yaml`` prints and ``--apply`` writes, and the label that marks it crdscope's own.
PLAN_NAME = "crdscope-activation-plan"
MANAGED_BY = ("app.kubernetes.io/managed-by", "crdscope")
#: Documents a go-template writes that are not composed resources (the XR's status, connection details,
#: extra resources requests): function-go-templating's own meta group.
TEMPLATE_META_GROUPS = ("meta.gotemplating.fn.crossplane.io",)
PT_GROUP = "pt.fn.crossplane.io"
GOTEMPLATING_GROUP = "gotemplating.fn.crossplane.io"

Severity = Literal["critical", "warning", "info"]
#: What an MRD costs the API server whatever its state: it carries its CRD's whole schema and sits in the
#: watch cache (1.37, one run: 2,065 inactive MRDs held 2,017 MiB against about 390 MiB for a fresh lab
#: with Crossplane; ``bench/RESULTS.md``, "An MRAP of a tenth of the kinds").
MRD_BYTES = 0.8 * (1 << 20)
MRDS_RESOURCE = "managedresourcedefinitions.apiextensions.crossplane.io"

_TEMPLATE_SEPARATOR = re.compile(r"^---\s*$")
_FIELD = re.compile(r"^(?P<indent>\s*)(?:-\s+)?(?P<key>apiVersion|kind):\s*(?P<value>.*?)\s*$")


def group_of(api_version: str) -> str:
    """``s3.aws.upbound.io/v1beta1`` -> ``s3.aws.upbound.io``; the core group (``v1``) is ``""``."""
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def plural_forms(kind: str) -> tuple[str, ...]:
    """The plural resource names generators give ``kind``, most common first.

    Kubebuilder and upjet pluralise with gobuffalo/flect: ``Bucket`` -> ``buckets``, ``Policy`` ->
    ``policies``, ``Address`` -> ``addresses``; kinds already plural keep their name (``RegionSettings``
    -> ``regionsettings``); ``Index`` -> ``indices``, ``Analysis`` -> ``analyses``, ``SLO`` -> ``sloes``.
    """
    lower = kind.lower()
    forms: list[str] = []
    if lower.endswith(("s", "x", "z", "ch", "sh")):
        forms.append(lower + "es")
    if len(lower) > 1 and lower.endswith("y") and lower[-2] not in "aeiou":
        forms.append(lower[:-1] + "ies")
    forms += [lower + "s", lower]
    if lower.endswith(("ex", "ix")):
        forms.append(lower[:-2] + "ices")
    if lower.endswith("is"):
        forms.append(lower[:-2] + "es")
    forms.append(lower + "es")
    return tuple(dict.fromkeys(forms))


# --------------------------------------------------------------------------- what Compositions compose


@dataclasses.dataclass(frozen=True)
class Composed:
    """One ``apiVersion``/``kind`` a Composition's step names as a composed resource."""

    api_version: str
    kind: str
    composition: str
    step: str
    #: The XR type the Composition serves (``XBucket.platform.example.org``).
    composite: str
    #: False: named by a function crdscope cannot read (counts only where it names an MRD).
    certain: bool = True

    @property
    def group(self) -> str:
        return group_of(self.api_version)

    @property
    def where(self) -> str:
        return f"Composition {self.composition}, step {self.step}"


@dataclasses.dataclass(frozen=True)
class Unreadable:
    """A step whose composed kinds cannot be read without running it."""

    composition: str
    step: str
    reason: str


@dataclasses.dataclass(frozen=True)
class CompositionKinds:
    """What one Composition composes, as far as its pipeline can be read."""

    name: str
    composite: str
    composed: tuple[Composed, ...] = ()
    unreadable: tuple[Unreadable, ...] = ()


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _pairs(node: Any, skip_top: bool = True) -> Iterator[tuple[str, str]]:
    """Every mapping below ``node`` holding string ``apiVersion`` and ``kind`` (the node itself skipped)."""
    stack = [(node, True)] if skip_top else [(node, False)]
    while stack:
        current, top = stack.pop()
        if isinstance(current, dict):
            api_version, kind = _str(current.get("apiVersion")), _str(current.get("kind"))
            if not top and api_version and kind:
                yield api_version, kind
            stack.extend((value, False) for value in reversed(list(current.values())))
        elif isinstance(current, list):
            stack.extend((value, False) for value in reversed(current))


def template_kinds(template: str) -> tuple[list[tuple[str, str, bool]], list[str]]:
    """(apiVersion, kind, literal) of a go-template's YAML documents, and what could not be paired.

    Each document's outermost ``apiVersion:`` and ``kind:`` lines are paired in order; ``literal`` is
    False where either holds a template action (``{{ ... }}``): computed when the function runs.
    """
    pairs: list[tuple[str, str, bool]] = []
    gaps: list[str] = []
    documents: list[list[str]] = [[]]
    for line in template.splitlines():
        if _TEMPLATE_SEPARATOR.match(line):
            documents.append([])
        else:
            documents[-1].append(line)
    for number, lines in enumerate((d for d in documents if d), start=1):
        fields = [(len(m["indent"]), m["key"], m["value"].strip("'\"")) for m in map(_FIELD.match, lines) if m]
        if not fields:
            continue
        outer = min(indent for indent, _, _ in fields)
        api_versions = [value for indent, key, value in fields if indent == outer and key == "apiVersion"]
        kinds = [value for indent, key, value in fields if indent == outer and key == "kind"]
        for api_version, kind in zip(api_versions, kinds, strict=False):
            pairs.append((api_version, kind, "{{" not in api_version and "{{" not in kind))
        if len(api_versions) != len(kinds):
            gaps.append(f"document {number}: {len(api_versions)} apiVersion lines against {len(kinds)} kind lines")
    return pairs, gaps


def read_composition(obj: Mapping[str, Any]) -> CompositionKinds:
    """The kinds a Composition object (pipeline mode) composes, step by step."""
    name = _str(_dict(obj.get("metadata")).get("name")) or "(unnamed)"
    spec = _dict(obj.get("spec"))
    ref = _dict(spec.get("compositeTypeRef"))
    composite_api, composite_kind = _str(ref.get("apiVersion")), _str(ref.get("kind"))
    composite = f"{composite_kind}.{group_of(composite_api)}" if composite_kind else "(no compositeTypeRef)"
    composed: list[Composed] = []
    unreadable: list[Unreadable] = []
    found_steps = spec.get("pipeline")
    steps: list[Any] = found_steps if isinstance(found_steps, list) else []
    if not steps and spec.get("resources"):
        unreadable.append(Unreadable(name, "(resources)", "Crossplane v1's resources mode: v2 runs pipelines only"))
    for index, step in enumerate(steps):
        if not isinstance(step, dict):
            continue
        step_name = _str(step.get("step")) or f"#{index}"
        body = _dict(step.get("input"))
        if not body:
            continue
        input_group = group_of(_str(body.get("apiVersion")))

        def add(api_version: str, kind: str, certain: bool = True, step_name: str = step_name) -> None:
            if api_version == composite_api and kind == composite_kind:
                return  # the XR itself (a go-template writing its status): not composed
            if group_of(api_version) in TEMPLATE_META_GROUPS:
                return
            composed.append(Composed(api_version, kind, name, step_name, composite, certain))

        if input_group == PT_GROUP:
            for resource in body.get("resources") or []:
                base = resource.get("base") if isinstance(resource, dict) else None
                api_version, kind = (_str(base.get("apiVersion")), _str(base.get("kind"))) \
                    if isinstance(base, dict) else ("", "")
                if api_version and kind:
                    add(api_version, kind)
                elif isinstance(resource, dict):
                    label = _str(resource.get("name")) or "a resource"
                    unreadable.append(Unreadable(name, step_name, f"{label}: its base names no apiVersion/kind"))
        elif input_group == GOTEMPLATING_GROUP:
            source = _str(body.get("source")) or "Inline"
            template = _str(_dict(body.get("inline")).get("template"))
            if source != "Inline":
                unreadable.append(Unreadable(name, step_name, f"go-templating source {source}: the template is not "
                                                              "in the Composition"))
                continue
            pairs, gaps = template_kinds(template)
            for api_version, kind, literal in pairs:
                if literal:
                    add(api_version, kind)
                elif kind != composite_kind:  # the XR itself, its apiVersion templated, is not composed
                    gaps.append(f"apiVersion/kind computed by the template ({api_version} {kind})")
            unreadable.extend(Unreadable(name, step_name, gap) for gap in gaps)
        else:
            for api_version, kind in _pairs(body):
                add(api_version, kind, certain=False)
    return CompositionKinds(name, composite, tuple(composed), tuple(unreadable))


# --------------------------------------------------------------------------- MRDs and their names


@dataclasses.dataclass(frozen=True)
class MRD:
    """One ManagedResourceDefinition as the planner needs it."""

    name: str
    state: str = "Inactive"
    #: Its CRD is Established (None: not known, as from files).
    established: bool | None = None
    #: ``spec.names.kind`` where known ("": only the name was read).
    kind: str = ""
    #: Stored objects of its kind (None: not known).
    objects: int | None = None

    @property
    def plural(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def group(self) -> str:
        return self.name.split(".", 1)[1] if "." in self.name else ""

    @property
    def active(self) -> bool:
        return self.state == "Active"


class Catalogue:
    """The MRDs by name and by group, and the MRD an ``apiVersion``/``kind`` names."""

    def __init__(self, mrds: Iterable[MRD]) -> None:
        self.by_name: dict[str, MRD] = {m.name: m for m in mrds}
        self.by_group: dict[str, dict[str, MRD]] = {}
        for mrd in self.by_name.values():
            self.by_group.setdefault(mrd.group, {})[mrd.plural] = mrd

    def resolve(self, api_version: str, kind: str) -> MRD | None:
        group = self.by_group.get(group_of(api_version))
        if not group:
            return None
        exact = [m for m in group.values() if m.kind == kind]
        if exact:
            return exact[0]
        for plural in plural_forms(kind):
            found = group.get(plural)
            if found is not None and (not found.kind or found.kind == kind):
                return found
        return None


# --------------------------------------------------------------------------- verdicts


@dataclasses.dataclass(frozen=True)
class Policy:
    """One MRAP: its name, its patterns, and whether crdscope wrote it (the only kind it replaces)."""

    name: str
    patterns: tuple[str, ...]
    ours: bool = False


@dataclasses.dataclass(frozen=True)
class Needed:
    """A kind the platform needs active, and why."""

    mrd: str
    kind: str
    state: str
    established: bool | None
    #: "Composition X, step Y (XR Z)" and/or "N objects".
    reasons: tuple[str, ...]
    #: XR types that fail while it is Inactive.
    composites: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class DeadEntry:
    """An MRAP entry that matches no MRD, and the MRD name it was most likely meant to be."""

    policy: str
    pattern: str
    #: malformed, singular, kind, typo, unknown-group, nothing
    why: str
    nearest: str
    explanation: str


@dataclasses.dataclass(frozen=True)
class Verdict:
    severity: Severity
    #: composed-inactive, composed-no-mrd, dead-entry, active-unused, not-established, unreadable
    code: str
    subject: str
    message: str


@dataclasses.dataclass(frozen=True)
class PlanEntry:
    pattern: str
    group: str
    reason: str


@dataclasses.dataclass(frozen=True)
class Plan:
    """The smallest MRAP that activates exactly the needed kinds."""

    name: str
    entries: tuple[PlanEntry, ...]

    @property
    def patterns(self) -> tuple[str, ...]:
        return tuple(e.pattern for e in self.entries)

    def yaml(self) -> str:
        """The MRAP as YAML for ``kubectl apply -f -``: one entry per line, a comment with its reason."""
        lines = [f"apiVersion: {MRAP_API_VERSION}", f"kind: {MRAP_KIND}", "metadata:", f"  name: {self.name}",
                 "  labels:", f"    {MANAGED_BY[0]}: {MANAGED_BY[1]}", "spec:"]
        if not self.entries:
            lines.append("  activate: []  # no composed kind and no kind in use: nothing to activate")
            return "\n".join(lines) + "\n"
        lines.append("  activate:")
        group = None
        for entry in self.entries:
            if entry.group != group:
                group = entry.group
                lines.append(f"  # {group}")
            lines.append(f"  - {_yaml_scalar(entry.pattern)}  # {entry.reason}")
        return "\n".join(lines) + "\n"


def _yaml_scalar(text: str) -> str:
    return f'"{text}"' if text[:1] in "*[?{&!|>'\"%@`" or ": " in text or " #" in text else text


@dataclasses.dataclass(frozen=True)
class ActivationReport:
    """Needed kinds, verdicts and the plan for one platform."""

    compositions: int
    mrds: int
    active: int
    needed: tuple[Needed, ...]
    verdicts: tuple[Verdict, ...]
    dead_entries: tuple[DeadEntry, ...]
    #: Active MRDs neither needed nor in use (names, sorted).
    active_unused: tuple[str, ...]
    #: Activated MRDs whose CRD is not Established yet.
    not_established: tuple[str, ...]
    unreadable: tuple[Unreadable, ...]
    plan: Plan
    #: Whether object counts were known (a cluster) or not (files): "unused" means "not needed" without them.
    objects_known: bool = True
    #: Composed kinds that are not managed resources here (nested XRs, Kubernetes objects), "Kind.group".
    other_kinds: tuple[str, ...] = ()

    def counted(self, code: str) -> int:
        return sum(1 for v in self.verdicts if v.code == code)

    @property
    def needed_inactive(self) -> tuple[Needed, ...]:
        return tuple(n for n in self.needed if n.state != "Active")


def _dead_entry(policy: str, pattern: str, catalogue: Catalogue) -> DeadEntry:
    names = sorted(catalogue.by_name)
    if not valid_pattern(pattern):
        literal = pattern.replace("[", "").replace("]", "").replace("\\", "")
        near = difflib.get_close_matches(literal, names, n=1, cutoff=0.5)
        return DeadEntry(policy, pattern, "malformed", near[0] if near else "",
                         "a malformed pattern (an unclosed [ or a trailing \\): Crossplane drops the match error "
                         "and activates nothing")
    has_glob = any(c in pattern for c in "*?[")
    if not has_glob and "." not in pattern:  # a kind, not an MRD name
        kinds = sorted(m.name for m in catalogue.by_name.values()
                       if m.kind.lower() == pattern.lower() or m.plural in plural_forms(pattern))
        return DeadEntry(policy, pattern, "kind", kinds[0] if kinds else "",
                         "a kind, not an MRD name (<plural>.<group>)"
                         + (f"; {len(kinds)} MRDs have that kind" if len(kinds) > 1 else ""))
    head, _, group = pattern.partition(".")
    members = catalogue.by_group.get(group)
    if not has_glob and members:
        for plural in plural_forms(head):
            if plural in members:
                return DeadEntry(policy, pattern, "singular", members[plural].name,
                                 "a singular (or kind) name: MRD names are plural")
        near = difflib.get_close_matches(pattern, [m.name for m in members.values()], n=1, cutoff=0.5)
        return DeadEntry(policy, pattern, "typo", near[0] if near else "",
                         f"no MRD of group {group} has that name")
    if has_glob:
        shapes = sorted({f"*.{g}" for g in catalogue.by_group} | set(names))
        near = difflib.get_close_matches(pattern, shapes, n=1, cutoff=0.5)
        return DeadEntry(policy, pattern, "nothing", near[0] if near else "",
                         "the pattern matches no MRD name (patterns match <plural>.<group>, * stops at nothing but /)")
    near = difflib.get_close_matches(pattern, names, n=1, cutoff=0.5)
    return DeadEntry(policy, pattern, "unknown-group" if not members else "typo", near[0] if near else "",
                     f"no MRD of group {group}" if not members else "no MRD has that name")


@dataclasses.dataclass
class _Uses:
    """What the Compositions compose, resolved against the MRDs (:func:`_composed_uses`)."""

    #: MRD name -> why it is needed ("Composition X, step Y (XR Z)", "N objects").
    reasons: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    #: MRD name -> the XR types composing it.
    composites: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    #: (apiVersion, kind) of an MRD group with no MRD of that kind -> where it is composed.
    missing: dict[tuple[str, str], list[Composed]] = dataclasses.field(default_factory=dict)
    #: Composed kinds that are not managed resources here, "Kind.group".
    other: set[str] = dataclasses.field(default_factory=set)


def _composed_uses(compositions: list[CompositionKinds], catalogue: Catalogue, xr_groups: set[str]) -> _Uses:
    """Each composed kind resolved to its MRD (with why it is needed), or set aside as missing or other."""
    uses = _Uses()
    for composition in compositions:
        for composed in composition.composed:
            mrd = catalogue.resolve(composed.api_version, composed.kind)
            if mrd is None:
                if composed.certain and composed.group in catalogue.by_group:
                    uses.missing.setdefault((composed.api_version, composed.kind), []).append(composed)
                elif composed.certain and composed.group not in xr_groups:
                    uses.other.add(f"{composed.kind}.{composed.group or 'core'}")
                continue
            why = f"{composed.where} (XR {composed.composite})"
            if why not in uses.reasons.setdefault(mrd.name, []):
                uses.reasons[mrd.name].append(why)
            uses.composites.setdefault(mrd.name, set()).add(composed.composite)
    for mrd in catalogue.by_name.values():
        if mrd.objects:
            uses.reasons.setdefault(mrd.name, []).append(f"{mrd.objects:,} objects")
    return uses


def _needed(uses: _Uses, catalogue: Catalogue) -> tuple[list[Needed], list[Verdict]]:
    """The needed kinds, and a critical verdict for each composed kind whose MRD is not Active."""
    needed, verdicts = [], []
    for name in sorted(uses.reasons):
        mrd = catalogue.by_name[name]
        reasons, composites = uses.reasons[name], uses.composites.get(name, set())
        needed.append(Needed(name, mrd.kind, mrd.state, mrd.established, tuple(reasons), tuple(sorted(composites))))
        if not mrd.active and composites:
            first = next(r for r in reasons if r.startswith("Composition"))
            verdicts.append(Verdict("critical", "composed-inactive", name,
                                    f"{first.split(' (XR')[0]} composes {name}: its MRD is {mrd.state or 'Inactive'}, "
                                    f"XRs of kind {', '.join(sorted(composites))} will fail (\"no matches for kind\")"))
    return needed, verdicts


def _no_mrd_verdicts(missing: dict[tuple[str, str], list[Composed]], catalogue: Catalogue) -> list[Verdict]:
    """A critical verdict per composed kind that no MRD of its group has."""
    verdicts = []
    for (api_version, kind), uses in sorted(missing.items()):
        group = group_of(api_version)
        near = difflib.get_close_matches(kind.lower(), list(catalogue.by_group[group]), n=1, cutoff=0.5)
        hint = f"; nearest: {near[0]}.{group}" if near else ""
        verdicts.append(Verdict("critical", "composed-no-mrd", f"{kind}.{group}",
                                f"{uses[0].where} composes {kind} ({api_version}): no MRD of group {group} has that "
                                f"kind{hint}; XRs of kind {uses[0].composite} will fail"))
    return verdicts


def _dead_entries(policies: list[Policy], catalogue: Catalogue) -> list[DeadEntry]:
    """The MRAP entries that match no MRD name."""
    names = list(catalogue.by_name)
    return [_dead_entry(policy.name, pattern, catalogue) for policy in policies for pattern in policy.patterns
            if not any(go_match(pattern, name) for name in names)]


def _dead_entry_verdict(entry: DeadEntry) -> Verdict:
    nearest = f"; did you mean {entry.nearest}?" if entry.nearest else ""
    return Verdict("warning", "dead-entry", f"{entry.policy}: {entry.pattern}",
                   f"MRAP {entry.policy}: entry {entry.pattern!r} matches no MRD: {entry.explanation}{nearest}")


def _active_unused_verdict(unused: list[str], catalogue: Catalogue, objects_known: bool) -> Verdict:
    groups = sorted({catalogue.by_name[n].group for n in unused})
    return Verdict("info", "active-unused", f"{len(unused)} kinds",
                   f"{len(unused)} active kinds are neither composed nor "
                   f"{'used' if objects_known else 'known to be used'} ({', '.join(groups[:4])}"
                   f"{', ...' if len(groups) > 4 else ''}); narrowing an MRAP will not remove them "
                   "(an Active MRD never goes back to Inactive)")


def _not_established_verdict(pending: list[str]) -> Verdict:
    return Verdict("warning", "not-established", f"{len(pending)} CRDs",
                   f"{len(pending)} activated kinds have no Established CRD yet ({', '.join(pending[:3])}"
                   f"{', ...' if len(pending) > 3 else ''}): clients get \"no matches for kind\" until they are")


def analyse(compositions: Iterable[CompositionKinds], mrds: Iterable[MRD], policies: Iterable[Policy], *,
            objects_known: bool = True, plan_name: str = PLAN_NAME,
            composite_groups: Iterable[str] = ()) -> ActivationReport:
    """Needed kinds, verdicts and the plan (``composite_groups``: XRD groups, whose kinds are XRs, not MRs)."""
    catalogue = Catalogue(mrds)
    compositions = list(compositions)
    xr_groups = set(composite_groups) | {c.composite.split(".", 1)[1] for c in compositions if "." in c.composite}
    uses = _composed_uses(compositions, catalogue, xr_groups)
    needed, verdicts = _needed(uses, catalogue)
    verdicts += _no_mrd_verdicts(uses.missing, catalogue)
    dead = _dead_entries(list(policies), catalogue)
    verdicts += [_dead_entry_verdict(entry) for entry in dead]
    active = [m for m in catalogue.by_name.values() if m.active]
    unused = sorted(m.name for m in active if m.name not in uses.reasons and (not objects_known or m.objects == 0))
    if unused:
        verdicts.append(_active_unused_verdict(unused, catalogue, objects_known))
    pending = sorted(m.name for m in active if m.established is False)
    if pending:
        verdicts.append(_not_established_verdict(pending))
    unreadable = tuple(u for c in compositions for u in c.unreadable)
    verdicts += [Verdict("info", "unreadable", f"{gap.composition}/{gap.step}",
                         f"Composition {gap.composition}, step {gap.step}: {gap.reason}") for gap in unreadable]
    return ActivationReport(
        compositions=len(compositions), mrds=len(catalogue.by_name), active=len(active), needed=tuple(needed),
        verdicts=tuple(verdicts), dead_entries=tuple(dead), active_unused=tuple(unused),
        not_established=tuple(pending), unreadable=unreadable, plan=plan_for(needed, catalogue, plan_name),
        objects_known=objects_known, other_kinds=tuple(sorted(uses.other)))


def plan_for(needed: Iterable[Needed], catalogue: Catalogue, name: str = PLAN_NAME) -> Plan:
    """Exact MRD names, grouped by API group; a group needed whole is one ``*.<group>`` entry, but only
    where that pattern matches nothing else: ``*`` matches dots too, so ``*.aws.upbound.io`` would
    activate every kind of ``s3.aws.upbound.io`` as well."""
    by_group: dict[str, list[Needed]] = {}
    for item in needed:
        by_group.setdefault(catalogue.by_name[item.mrd].group, []).append(item)
    entries = []
    for group in sorted(by_group):
        items = sorted(by_group[group], key=lambda n: n.mrd)
        whole = len(items) > 1 and len(items) == len(catalogue.by_group.get(group, {}))
        if whole and not any(other.endswith(f".{group}") for other in catalogue.by_group if other != group):
            entries.append(PlanEntry(f"*.{group}", group, f"all {len(items)} kinds of the group are needed"))
            continue
        for item in items:
            entries.append(PlanEntry(item.mrd, group, "; ".join(item.reasons)))
    return Plan(name, tuple(entries))


def policy_of(obj: Mapping[str, Any]) -> Policy:
    """An MRAP object as a :class:`Policy`."""
    metadata = obj.get("metadata") or {}
    labels = metadata.get("labels") or {}
    patterns = (obj.get("spec") or {}).get("activate") or []
    return Policy(_str(metadata.get("name")), tuple(p for p in patterns if isinstance(p, str)),
                  labels.get(MANAGED_BY[0]) == MANAGED_BY[1])


# --------------------------------------------------------------------------- the monitor's view

#: Names and messages a view keeps per list (a sample is recorded every 2 s); counts stay complete.
VIEW_KEPT = 10
#: Plan entries a view keeps (the findings' remedy prints them).
PLAN_KEPT = 200


@dataclasses.dataclass(frozen=True, kw_only=True)
class ActivationView:
    """What the monitor keeps of an :class:`ActivationReport`: counts complete, names bounded."""

    #: The Compositions were read (False: no Composition API, or not allowed: "needed" is then unknown).
    compositions_read: bool = False
    compositions: int = 0
    needed: int = 0
    needed_active: int = 0
    #: Composed kinds Inactive or without an MRD (critical): MRD names and verdict messages.
    composed_inactive: int = 0
    composed_inactive_names: tuple[str, ...] = ()
    composed_inactive_messages: tuple[str, ...] = ()
    #: MRAP entries that match no MRD (warning): "policy: pattern -> nearest" and messages.
    dead_entries: int = 0
    dead_entry_names: tuple[str, ...] = ()
    dead_entry_messages: tuple[str, ...] = ()
    #: Active MRDs neither composed nor in use.
    active_unused: int = 0
    active_unused_names: tuple[str, ...] = ()
    not_established: int = 0
    unreadable: int = 0
    #: The plan's ``spec.activate`` (at most :data:`PLAN_KEPT`) and its full length.
    plan: tuple[str, ...] = ()
    plan_entries: int = 0


def view_of(report: ActivationReport, *, compositions_read: bool) -> ActivationView:
    """The bounded view of ``report`` a sample carries."""
    critical = [v for v in report.verdicts if v.code in ("composed-inactive", "composed-no-mrd")]
    dead = [v for v in report.verdicts if v.code == "dead-entry"]
    return ActivationView(
        compositions_read=compositions_read, compositions=report.compositions, needed=len(report.needed),
        needed_active=sum(1 for n in report.needed if n.state == "Active"), composed_inactive=len(critical),
        composed_inactive_names=tuple(v.subject for v in critical[:VIEW_KEPT]),
        composed_inactive_messages=tuple(v.message for v in critical[:VIEW_KEPT]),
        dead_entries=len(dead),
        dead_entry_names=tuple(f"{d.policy}: {d.pattern}" + (f" -> {d.nearest}" if d.nearest else "")
                               for d in report.dead_entries[:VIEW_KEPT]),
        dead_entry_messages=tuple(v.message for v in dead[:VIEW_KEPT]),
        active_unused=len(report.active_unused), active_unused_names=report.active_unused[:VIEW_KEPT],
        not_established=len(report.not_established), unreadable=len(report.unreadable),
        plan=report.plan.patterns[:PLAN_KEPT], plan_entries=len(report.plan.entries))
