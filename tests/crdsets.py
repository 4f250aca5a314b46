"""CRD sets for tests: real Crossplane CRDs from ../shared/crds, and tiny generated ones.

The real archives are read in place (never copied into the repository); a
subset is unpacked into a temporary directory so that ``kubectl apply -f DIR``
and crdscope's loader see the same files.
"""

from __future__ import annotations

import tarfile
import time
from pathlib import Path
from urllib.parse import quote

import yaml

from tests.conftest import SHARED_CRDS
from tests.helpers import wait_for


def archive(name: str) -> Path:
    """Path of a shared archive, e.g. ``archive("provider-gcp")``."""
    return SHARED_CRDS / f"{name}.tar.xz"


def extract(name: str, target: Path, *, limit: int | None = None, groups: int | None = None) -> list[Path]:
    """Unpack CRD files of a shared archive into ``target`` (sorted by name, deterministic).

    ``limit`` keeps the first N files; ``groups`` keeps every CRD of the first N API groups
    (a realistic slice: whole providers' groups, as an install creates them).
    """
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive(name), "r:xz") as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile() and m.name.endswith(".yaml")),
                         key=lambda m: m.name)
        if groups is not None:
            chosen_groups = sorted({Path(m.name).name.split("_")[0] for m in members})[:groups]
            members = [m for m in members if Path(m.name).name.split("_")[0] in chosen_groups]
        if limit is not None:
            members = members[:limit]
        # Read in archive order, not name order: each backward seek in an xz stream decompresses it
        # again from the start (17 s for 300 AWS CRDs that way, against one pass).
        for member in sorted(members, key=lambda m: m.offset_data):
            (target / Path(member.name).name).write_bytes(tar.extractfile(member).read())
    return [target / Path(member.name).name for member in members]


#: libyaml's safe loader where PyYAML has it: the pure-Python one took 14 s for 198 AWS CRDs, libyaml 2 s.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def crd_names(paths: list[Path]) -> list[str]:
    """metadata.name of each CRD file."""
    names = []
    for path in paths:
        for document in yaml.load_all(path.read_text(), Loader=SAFE_LOADER):
            if document and document.get("kind") == "CustomResourceDefinition":
                names.append(document["metadata"]["name"])
    return names


def tiny_crd(group: str, kind: str, *, versions: tuple[str, ...] = ("v1",), scope: str = "Cluster",
             labels: dict | None = None) -> dict:
    """A minimal valid CRD (for tests that need many cheap ones)."""
    plural = kind.lower() + "s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", "labels": labels or {}},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "versions": [
                {"name": v, "served": True, "storage": i == 0,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
                for i, v in enumerate(versions)
            ],
        },
    }


def write_tiny_crds(target: Path, count: int, *, prefix: str = "t", per_group: int = 5,
                    labels: dict | None = None) -> Path:
    """Write ``count`` tiny CRDs spread over groups into one multi-document YAML file."""
    target.mkdir(parents=True, exist_ok=True)
    documents = [
        tiny_crd(f"g{i // per_group}.{prefix}.crdscope.test", f"Kind{prefix.capitalize()}{i}", labels=labels)
        for i in range(count)
    ]
    path = target / f"{prefix}-{count}.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    return path


CRD_COLLECTION = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

#: Seconds between annotations of CRDs that linger in deletion (see :func:`delete_crds`).
NUDGE_EVERY = 5.0


def delete_crds(lab, *names: str, selector: str | None = None, timeout: float = 180.0) -> None:
    """Delete CRDs by name and/or label selector and wait until they are gone (tests share one lab).

    The API server's CRD finalizer lists a CRD's objects before letting it go; on
    a CRD created moments before, that list can fail with "storage is
    (re)initializing" and the CRD then waits for the finalizer's next resync, up
    to five minutes (seen on the lab, and upstream: operator-framework/
    operator-controller#1437).  Any update requeues it at once, so CRDs that
    linger get an annotation, as ``crdscope clean`` does for its own.
    """
    if names:
        lab.kubectl("delete", "crd", "--ignore-not-found", "--wait=false", *names, timeout=600)
    if selector:
        # One DELETE of the collection, as tests/e2e/test_discovery.py does: `kubectl delete -l`
        # lists, then sends one DELETE per CRD through its client's rate limiter.
        lab.kubectl("delete", "--raw", f"{CRD_COLLECTION}?labelSelector={quote(selector, safe='')}", timeout=600)
    wanted = set(names)
    started = last_nudge = time.monotonic()

    def lingering() -> list[str]:
        left: set[str] = set()
        if names:
            left |= {i["metadata"]["name"] for i in lab.kubectl_json("get", "crd")["items"]} & wanted
        if selector:
            left |= {i["metadata"]["name"] for i in lab.kubectl_json("get", "crd", "-l", selector)["items"]}
        return sorted(left)

    def gone() -> bool:
        nonlocal last_nudge
        left = lingering()
        now = time.monotonic()
        if left and now - started > NUDGE_EVERY and now - last_nudge >= NUDGE_EVERY:
            last_nudge = now
            lab.kubectl("annotate", "crd", *left, f"crdscope.test/nudge={int(now)}", "--overwrite", check=False)
        return not left

    try:
        wait_for(gone, timeout=timeout, interval=1.0, message="deleted CRDs to be gone")
    except AssertionError:
        stuck = [(i["metadata"]["name"], i["metadata"].get("finalizers"), i.get("status", {}).get("conditions"))
                 for i in lab.kubectl_json("get", "crd")["items"] if i["metadata"].get("deletionTimestamp")]
        raise AssertionError(f"CRDs stuck in deletion: {stuck}") from None

