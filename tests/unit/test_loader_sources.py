"""Loader sources: files, directories, archives, stdin, bad input per item, synthetic CRDs.

The reference for "which CRDs are in these files" is PyYAML's own reading of
them (tests.crdsets.crd_names), not the loader's parser.
"""

from __future__ import annotations

import collections
import io
import json
import tarfile
from pathlib import Path

import pytest
import yaml

from crdscope.loader.sources import (ArchiveSource, CRDDocument, DirectorySource, SourceProblem, StdinSource, UniqueNames,
                            YamlFileSource, open_source)
from crdscope.loader.synthetic import SyntheticSource, synthetic_documents
from crdscope.connection.crdwatch import MANAGED_BY_LABEL, RUN_ANNOTATION
from crdscope.base.errors import ConfigError
from tests.crdsets import crd_names, tiny_crd

CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "not-a-crd"}, "data": {"a": "b"}}


def read(source) -> list:
    source.prepare()
    return list(source.items())


def crds(items) -> list[CRDDocument]:
    return [i for i in items if isinstance(i, CRDDocument)]


def problems(items, outcome: str = "failed") -> list[SourceProblem]:
    return [i for i in items if isinstance(i, SourceProblem) and i.outcome == outcome]


def write_crd_files(folder: Path, count: int, prefix: str = "f") -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for index in range(count):
        path = folder / f"{prefix}{index:02d}.yaml"
        path.write_text(yaml.safe_dump(tiny_crd(f"g{index}.{prefix}.example.test", f"Kind{index}")))
        paths.append(path)
    return paths


# --------------------------------------------------------------------------- files and directories


def test_directory_reads_every_yaml_file_recursively_in_path_order(tmp_path: Path):
    top = write_crd_files(tmp_path / "crds", 3, "a")
    nested = write_crd_files(tmp_path / "crds" / "more", 2, "b")
    (tmp_path / "crds" / "README.md").write_text("kind: CustomResourceDefinition\n")  # not a YAML file
    (tmp_path / "crds" / "configmap.yml").write_text(yaml.safe_dump(CONFIGMAP))
    (tmp_path / "crds" / ".hidden.yaml").write_text(yaml.safe_dump(tiny_crd("hidden.example.test", "Hidden")))
    items = read(DirectorySource(tmp_path / "crds"))
    expected_order = sorted(top + nested + [tmp_path / "crds" / "configmap.yml"])
    expected = crd_names([p for p in expected_order if p.name != "configmap.yml"])
    assert [c.name for c in crds(items)] == expected
    assert len(problems(items, "not-crd")) == 1
    assert "v1 ConfigMap is not a CustomResourceDefinition" in problems(items, "not-crd")[0].reason
    assert problems(items) == []


def test_multi_document_yaml_reports_a_broken_document_with_file_and_line_and_goes_on(tmp_path: Path):
    good = [tiny_crd("one.example.test", "One"), tiny_crd("two.example.test", "Two")]
    text = (yaml.safe_dump(good[0]) + "---\n"
            + "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n"
            + "  name: broken.example.test\n  labels: {a: b\n"  # unclosed flow mapping
            + "---\n" + yaml.safe_dump(CONFIGMAP) + "---\n" + yaml.safe_dump(good[1]) + "---\n")
    path = tmp_path / "set.yaml"
    path.write_text(text)
    items = read(YamlFileSource(path))
    assert [c.name for c in crds(items)] == ["ones.one.example.test", "twos.two.example.test"]
    [broken] = problems(items)
    # Hand count: the broken document starts after the first one's lines and its separator.
    first_doc_lines = len(yaml.safe_dump(good[0]).splitlines())
    broken_starts = first_doc_lines + 2  # the separator line, then "apiVersion"
    line = int(broken.origin.rsplit(":", 1)[1])
    assert broken.origin.startswith(str(path) + ":")
    assert broken_starts <= line <= broken_starts + 6, broken
    assert "YAML error" in broken.reason
    assert len(problems(items, "not-crd")) == 1


def test_documents_carry_their_starting_line(tmp_path: Path):
    path = tmp_path / "two.yaml"
    path.write_text("# a comment\n---\n" + yaml.safe_dump(tiny_crd("a.example.test", "A"))
                    + "---\n" + yaml.safe_dump(tiny_crd("b.example.test", "B")))
    first, second = crds(read(YamlFileSource(path)))
    assert first.origin == f"{path}:3"
    assert second.origin == f"{path}:{3 + len(yaml.safe_dump(tiny_crd('a.example.test', 'A')).splitlines()) + 1}"


def test_lists_are_expanded_and_old_crd_versions_fail_with_a_reason(tmp_path: Path):
    listing = {"apiVersion": "v1", "kind": "List", "items": [tiny_crd("l1.example.test", "L"), CONFIGMAP]}
    old = tiny_crd("old.example.test", "Old")
    old["apiVersion"] = "apiextensions.k8s.io/v1beta1"
    path = tmp_path / "list.json"
    path.write_text(json.dumps(listing) + "\n---\n" + json.dumps(old))
    items = read(YamlFileSource(path))
    assert [c.name for c in crds(items)] == ["ls.l1.example.test"]
    assert len(problems(items, "not-crd")) == 1
    [failed] = problems(items)
    assert "v1beta1 is not served" in failed.reason


def test_crd_without_name_fails_and_server_fields_are_dropped(tmp_path: Path):
    nameless = tiny_crd("n.example.test", "N")
    del nameless["metadata"]["name"]
    exported = tiny_crd("e.example.test", "E")
    exported["metadata"].update({"uid": "x", "resourceVersion": "42", "managedFields": [{}],
                                 "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}",
                                                 "keep": "me"}})
    exported["status"] = {"conditions": []}
    path = tmp_path / "mixed.yaml"
    path.write_text(yaml.safe_dump_all([nameless, exported]))
    items = read(YamlFileSource(path))
    assert "without metadata.name" in problems(items)[0].reason
    [document] = crds(items)
    body = json.loads(document.apply_body(run_id="r1", resource_version="1"))
    assert body["metadata"] == {"name": "es.e.example.test", "labels": {MANAGED_BY_LABEL: "crdscope"},
                                "annotations": {"keep": "me", RUN_ANNOTATION: "r1"}, "resourceVersion": "1"}
    assert "status" not in body
    assert body["spec"] == exported["spec"]


def test_yaml_timestamps_stay_strings_as_the_api_server_reads_them(tmp_path: Path):
    crd = tiny_crd("t.example.test", "T")
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(crd).replace("scope: Cluster", "scope: Cluster\n  x-date: 2024-01-02"))
    [document] = crds(read(YamlFileSource(path)))
    assert json.loads(document.spec_json)["x-date"] == "2024-01-02"


def test_stdin_is_read_and_identified_by_its_content():
    text = yaml.safe_dump_all([tiny_crd("s1.example.test", "S"), tiny_crd("s2.example.test", "S")]).encode()
    first, again, other = StdinSource(io.BytesIO(text)), StdinSource(io.BytesIO(text)), StdinSource(io.BytesIO(text + b"\n#"))
    items = read(first)
    assert [c.name for c in crds(items)] == ["ss.s1.example.test", "ss.s2.example.test"]
    again.prepare()
    other.prepare()
    assert first.key == again.key != other.key
    assert first.estimate == 2


def test_a_file_that_is_not_utf8_is_reported(tmp_path: Path):
    path = tmp_path / "bin.yaml"
    path.write_bytes(yaml.safe_dump(tiny_crd("u.example.test", "U")).encode() + b"---\n\xff\xfe\x00garbage\n")
    items = read(YamlFileSource(path))
    assert [c.name for c in crds(items)] == ["us.u.example.test"]
    assert "not UTF-8" in problems(items)[0].reason


def test_open_source_rejects_what_does_not_exist_in_one_line(tmp_path: Path):
    with pytest.raises(ConfigError, match="no such file or directory"):
        open_source(str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="synthetic:N"):
        open_source("synthetic:lots")
    with pytest.raises(ConfigError, match="not both"):
        open_source("synthetic:3", from_context="other")


# --------------------------------------------------------------------------- archives


def make_archive(path: Path, files: list[Path], mode: str, extra: dict[str, bytes] | None = None) -> Path:
    with tarfile.open(path, mode) as tar:
        for file in files:
            tar.add(file, arcname=f"crds/{file.name}")
        for name, data in (extra or {}).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize("suffix,mode", [(".tar", "w"), (".tar.gz", "w:gz"), (".tar.xz", "w:xz")])
def test_archives_give_the_same_crds_as_the_directory(tmp_path: Path, suffix: str, mode: str):
    files = write_crd_files(tmp_path / "crds", 5)
    archive = make_archive(tmp_path / f"set{suffix}", files, mode, {"crds/README.md": b"# docs\n"})
    source = open_source(str(archive))
    assert isinstance(source, ArchiveSource)
    items = read(source)
    assert [c.name for c in crds(items)] == crd_names(files)
    assert source.estimate == 5
    assert problems(items) == []


def test_corrupt_member_content_is_reported_and_the_rest_loads(tmp_path: Path):
    files = write_crd_files(tmp_path / "crds", 4)
    archive = make_archive(tmp_path / "set.tar.xz", files, "w:xz",
                           {"crds/zz-garbage.yaml": bytes(range(256)) * 4,
                            "crds/zz-broken.yaml": b"kind: CustomResourceDefinition\nmetadata: [unclosed\n"})
    items = read(ArchiveSource(archive))
    assert [c.name for c in crds(items)] == crd_names(files)
    reasons = {p.origin: p.reason for p in problems(items)}
    assert "not UTF-8" in reasons[f"{archive}:crds/zz-garbage.yaml"]
    broken = [origin for origin in reasons if origin.startswith(f"{archive}:crds/zz-broken.yaml:")]
    assert broken and "YAML error" in reasons[broken[0]]


@pytest.mark.parametrize("block,survivors", [("extended", [0, 1, 2]), ("member", [0, 2])])
def test_a_corrupt_member_header_is_skipped_and_reported(tmp_path: Path, block: str, survivors: list[int]):
    files = write_crd_files(tmp_path / "crds", 3)
    archive = make_archive(tmp_path / "set.tar", files, "w", )
    data = bytearray(archive.read_bytes())
    with tarfile.open(archive) as tar:
        second = tar.getmembers()[1]
    assert second.offset_data - second.offset == 1536, "expected a pax header before the member's own"
    # The pax extended header (the member still has its own header) or the member's own header.
    start = second.offset if block == "extended" else second.offset_data - 512
    data[start:start + 512] = b"\x17" * 512
    archive.write_bytes(bytes(data))
    items = read(ArchiveSource(archive))
    assert [c.name for c in crds(items)] == crd_names([files[i] for i in survivors])
    [problem] = problems(items)
    assert "corrupt member header" in problem.reason
    assert files[1 if block == "extended" else 2].name in problem.origin


def test_a_truncated_archive_loads_what_came_before_and_says_so(tmp_path: Path):
    files = write_crd_files(tmp_path / "crds", 20)
    archive = make_archive(tmp_path / "set.tar.gz", files, "w:gz")
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    items = read(ArchiveSource(archive))
    loaded = [c.name for c in crds(items)]
    assert 0 < len(loaded) < 20
    assert loaded == crd_names(files)[: len(loaded)]
    assert len(problems(items)) == 1


def test_a_file_that_is_not_an_archive_is_one_problem(tmp_path: Path):
    path = tmp_path / "fake.tar.xz"
    path.write_bytes(b"this is not xz")
    items = read(ArchiveSource(path))
    assert crds(items) == [] and "not a readable tar archive" in problems(items)[0].reason


# --------------------------------------------------------------------------- names


def test_names_repeated_within_the_source_are_skipped_after_the_first(tmp_path: Path):
    first = tiny_crd("dup.example.test", "Dup")
    second = tiny_crd("dup.example.test", "Dup", versions=("v2",))
    path = tmp_path / "dups.yaml"
    path.write_text(yaml.safe_dump_all([first, second, tiny_crd("other.example.test", "O")]))
    unique = UniqueNames()
    checked = [unique.check(item) for item in read(YamlFileSource(path))]
    assert [c.name for c in crds(checked)] == ["dups.dup.example.test", "os.other.example.test"]
    [skipped] = problems(checked, "skipped")
    assert "duplicate name dups.dup.example.test" in skipped.reason and f"{path}:1" in skipped.reason


# --------------------------------------------------------------------------- synthetic


def count_properties(schema: dict) -> int:
    """Properties of a schema, nested ones included (written independently of the generator)."""
    total = 0
    for child in (schema.get("properties") or {}).values():
        total += 1 + count_properties(child)
    if isinstance(schema.get("items"), dict):
        total += count_properties(schema["items"])
    return total


def test_synthetic_is_deterministic_for_a_seed_and_a_prefix_of_larger_sets():
    a = [json.dumps(d, sort_keys=True) for d in synthetic_documents(120, seed=5)]
    b = [json.dumps(d, sort_keys=True) for d in synthetic_documents(120, seed=5)]
    larger = [json.dumps(d, sort_keys=True) for d in synthetic_documents(200, seed=5)]
    other = [json.dumps(d, sort_keys=True) for d in synthetic_documents(120, seed=6)]
    assert a == b == larger[:120]
    assert a != other


def test_synthetic_has_real_proportions_and_crossplane_shape():
    documents = list(synthetic_documents(2000, seed=3, schema_props=25))
    groups = collections.defaultdict(set)
    versions = collections.defaultdict(set)
    scopes = collections.Counter()
    for document in documents:
        spec = document["spec"]
        groups[spec["group"]].add(document["metadata"]["name"])
        versions[spec["group"]].update(v["name"] for v in spec["versions"] if v["served"])
        scopes[spec["scope"]] += 1
        assert document["metadata"]["name"] == f"{spec['names']['plural']}.{spec['group']}"
        assert sum(v["storage"] for v in spec["versions"]) == 1
        assert {"crossplane", "managed"} <= set(spec["names"]["categories"])
        version = spec["versions"][0]
        assert [c["name"] for c in version["additionalPrinterColumns"]] == ["SYNCED", "READY", "EXTERNAL-NAME", "AGE"]
        schema = version["schema"]["openAPIV3Schema"]["properties"]
        assert count_properties(schema["spec"]["properties"]["forProvider"]) == 25
        assert count_properties(schema["spec"]["properties"]["initProvider"]) == 25
        assert count_properties(schema["status"]["properties"]["atProvider"]) == 26
    assert len({d["metadata"]["name"] for d in documents}) == 2000
    per_group = len(documents) / len(groups)
    versions_per_group = sum(len(v) for v in versions.values()) / len(versions)
    # provider-aws: 5.8 CRDs and 1.35 versions per group; half namespaced (Crossplane v2 .m. groups).
    assert 4.5 <= per_group <= 7.5, per_group
    assert 1.2 <= versions_per_group <= 1.5, versions_per_group
    assert abs(scopes["Namespaced"] - scopes["Cluster"]) <= 0.1 * len(documents)


def test_synthetic_source_items_and_knob_checks():
    source = SyntheticSource.parse("synthetic:7", seed=2, schema_props=3)
    items = read(source)
    assert len(crds(items)) == 7 and source.estimate == 7
    assert source.key != SyntheticSource.parse("synthetic:7", seed=2, schema_props=4).key
    with pytest.raises(ConfigError, match="schema-props"):
        SyntheticSource(3, schema_props=-1)
    with pytest.raises(ConfigError, match="at least 1"):
        SyntheticSource(0)
