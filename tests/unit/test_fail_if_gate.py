"""``estimate --fail-if`` and ``mrap --fail-if`` (issue 47 item 7): a gate on a one-shot command's own figures.

No cluster: ``estimate`` prices against an empty cluster (``--kubernetes``) and ``mrap`` reads files.
The README's exit codes: 1 when a gate is crossed (one line naming it and its figure, after the normal
output), 2 for an expression or a name that is no figure (one line, nothing printed before it), and
``mrap``'s 2 for a composed kind without an MRD outranks a crossed gate.
"""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from crdscope.base.errors import ConfigError
from crdscope.cli.gate import figure_of, judge, parse_gates
from crdscope.cli.main import cli
from crdscope.session.failif import OPERATORS, parse_comparison

ESTIMATE = ["estimate", "synthetic:30", "--kubernetes", "1.37"]


def run(*argv: str):
    return CliRunner().invoke(cli, list(argv))


def one_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


# --------------------------------------------------------------------------- the grammar and the walk


def test_the_grammar_is_the_watchs_on_a_json_key():
    for op in OPERATORS:
        parsed = parse_comparison(f"memory.held_added_mib {op} -1.5e2", "x>1")
        assert (parsed.path, parsed.op, parsed.limit) == (("memory", "held_added_mib"), op, -150.0)
    assert parse_comparison("crds_added>200", "x>1").path == ("crds_added",)  # a top-level key: no dot needed
    for bad in ("crds_added", "crds_added>>2", ">2", "crds_added>two", "memory..held>1"):
        with pytest.raises(ConfigError, match="is not <figure><op><number>"):
            parse_comparison(bad, "x>1")
    with pytest.raises(ConfigError, match="'for DURATION' is for watch --headless"):
        parse_comparison("crds_added>2 for 2m", "x>1")


def test_a_figure_is_a_number_an_intervals_value_or_a_lists_length():
    data = {"crds_added": 7, "memory": {"rss_added_mib": {"value": 10.0, "low": 8.0, "high": 12.0}},
            "top_crds": [{}, {}, {}], "ok": True, "source": "x", "limit_mib": None}
    gates = parse_gates(["crds_added>=7", "memory.rss_added_mib>11", "memory.rss_added_mib.high>11",
                         "top_crds==3", "ok==1"], "x>1")
    assert [c.comparison.text for c in judge(gates, data)] == ["crds_added>=7", "memory.rss_added_mib.high>11",
                                                               "top_crds==3", "ok==1"]
    with pytest.raises(ConfigError, match="source is text, not a number"):
        figure_of(data, parse_comparison("source>1", "x>1"))
    with pytest.raises(ConfigError, match=r"limit_mib is null in this run \(a figure it does not produce: say so\)"):
        figure_of(data, parse_comparison("limit_mib>1", "x>1"), {"limit_mib": "say so"})
    with pytest.raises(ConfigError, match="crds_added is not a record"):
        figure_of(data, parse_comparison("crds_added.value>1", "x>1"))


# --------------------------------------------------------------------------- estimate


def test_a_crossed_gate_exits_1_with_one_line_after_the_output():
    crossed = run(*ESTIMATE, "--fail-if", "crds_added>29", "--fail-if", "crds_removed>0")
    assert crossed.exit_code == 1, crossed.output
    assert crossed.stdout.startswith("source ") and "API-server memory added" in crossed.stdout
    assert one_line(crossed) == "crdscope: --fail-if crossed: crds_added>29 (crds_added = 30)"
    passed = run(*ESTIMATE, "--fail-if", "crds_added>30", "--fail-if", "crds_removed>0")
    assert passed.exit_code == 0 and passed.stderr == "", passed.output


def test_every_crossed_gate_is_on_the_line_and_in_the_json():
    first = json.loads(run(*ESTIMATE, "--json").stdout)
    held = first["memory"]["held_added_mib"]
    assert held["low"] < held["value"] < held["high"]
    between = (held["value"] + held["high"]) / 2  # over the prediction, under its upper bound
    result = run(*ESTIMATE, "--json", "--fail-if", f"memory.held_added_mib>{between}",
                 "--fail-if", f"memory.held_added_mib.high>{between}", "--fail-if", "crds_added>=30")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["fail_if"]["conditions"] == [f"memory.held_added_mib>{between}",
                                             f"memory.held_added_mib.high>{between}", "crds_added>=30"]
    assert [(c["condition"], c["figure"], c["value"]) for c in data["fail_if"]["crossed"]] == [
        (f"memory.held_added_mib.high>{between}", "memory.held_added_mib.high", held["high"]),
        ("crds_added>=30", "crds_added", 30)]
    assert one_line(result) == (f"crdscope: --fail-if crossed: memory.held_added_mib.high>{between} "
                                f"(memory.held_added_mib.high = {held['high']:g}); crds_added>=30 (crds_added = 30)")
    assert run(*ESTIMATE, "--json").exit_code == 0
    assert json.loads(run(*ESTIMATE, "--json").stdout)["fail_if"] == {"conditions": [], "crossed": []}


@pytest.mark.parametrize(("gate", "said"), [
    ("crds_addd>1", "--fail-if 'crds_addd>1': the output has no figure 'crds_addd' (figures: source,"),
    ("memory>1", "--fail-if 'memory>1': memory is a record, not a number (figures: rss_added_mib,"),
    ("memory.limit_mib>1", "memory.limit_mib is null in this run (a figure it does not produce: give --memory-limit"),
    ("installed_crds>1", "installed_crds is null in this run (a figure it does not produce: --context compares"),
    ("model>1", "--fail-if 'model>1': model is text, not a number"),
    ("crds_added=>1", "--fail-if 'crds_added=>1' is not <figure><op><number>"),
    ("crds_added>1 for 1m", "'for DURATION' is for watch --headless"),
])
def test_a_gate_that_names_no_figure_is_one_line_and_exit_2_before_any_output(gate, said):
    # A good gate that crosses beside it: a typo is never a pass, nor a failure of the good one.
    result = run(*ESTIMATE, "--fail-if", "crds_added>1", "--fail-if", gate)
    assert result.exit_code == 2, result.output
    assert said in one_line(result) and result.stdout == ""


def test_gates_that_do_not_go_with_the_flags_are_refused():
    measured = run("estimate", "synthetic:3", "--measure", "--fail-if", "crds_added>1")
    assert measured.exit_code == 2 and "does not go with --measure" in one_line(measured)
    replaces = run("estimate", "synthetic:3", "--replaces", "names")
    assert replaces.exit_code == 2 and "give --context" in one_line(replaces)


# --------------------------------------------------------------------------- mrap


@pytest.fixture
def platform_dir(tmp_path):
    from crdscope.loader.synthetic import synthetic_documents

    (tmp_path / "crds.yaml").write_text(yaml.safe_dump_all(list(synthetic_documents(20))))
    return tmp_path


def test_mrap_gates_on_its_own_json_keys(platform_dir):
    crossed = run("mrap", "--from", str(platform_dir), "--fail-if", "cost.all_crds>=20")
    assert crossed.exit_code == 1, crossed.output
    assert "Plan: MRAP" in crossed.stdout
    assert one_line(crossed) == "crdscope: --fail-if crossed: cost.all_crds>=20 (cost.all_crds = 20)"
    passed = run("mrap", "--from", str(platform_dir), "--json", "--fail-if", "cost.all_crds>20")
    assert passed.exit_code == 0 and json.loads(passed.stdout)["fail_if"]["crossed"] == []
    upgrade = run("mrap", "--from", str(platform_dir), "--fail-if", "upgrade.crds_added>1")
    assert upgrade.exit_code == 2 and "--from NEW --context CTX prices an upgrade" in one_line(upgrade)
    assert json.loads(passed.stdout)["upgrade"] is None


def test_mrap_a_composed_kind_without_an_mrd_outranks_a_crossed_gate(platform_dir):
    from tests.unit.test_activation import composition, pt

    (platform_dir / "platform.yaml").write_text(yaml.safe_dump(composition(pt(("storage.m.synthetic.crdscope.dev/v1",
                                                                               "NoSuchKind")))))
    result = run("mrap", "--from", str(platform_dir), "--fail-if", "cost.all_crds>=20")
    assert result.exit_code == 2, result.output
    assert one_line(result) == "crdscope: --fail-if crossed: cost.all_crds>=20 (cost.all_crds = 20)"
