"""Simulator evidence in `propose-rule` (cakegov/govern/evidence.py): every flipped
schedule is simulated, its evidence is read against the flip, and a newly rejected
invalid schedule that simulates correctly blocks as `label-looks-wrong`."""

from __future__ import annotations

import pytest

from .conftest import ROOT
from .test_propose import project, propose, rule_file, template  # noqa: F401

FORBID_ELEMENTWISE = """\
    for site in ctx.calls("elementwise"):
        yield ctx.finding(site.call, "elementwise is forbidden")
    """


def _labelled_legal_case(root, tmp_path, name: str, code: str, category: str):
    """A legal schedule (tile_1stage) labelled invalid with `code` at its elementwise, as
    a motivating case outside the corpus, and the proposed rule that 'catches' it."""
    source = (ROOT / "corpus/valid/scale/tile_1stage.cake").read_text().splitlines()
    source[1] = "# a legal schedule, labelled invalid"
    source[15] += f"  # expect: {code}"
    rel = f"examples/proposals/corpus/invalid/scale/{name}.cake"
    (root / rel).write_text("\n".join(source) + "\n")
    return rule_file(tmp_path / "no-elementwise.py", code, "no-elementwise",
                     FORBID_ELEMENTWISE, category=category, motivated_by=(rel,))


@pytest.mark.slow
def test_a_newly_rejected_valid_schedule_that_simulates_correctly_is_confirmed_legal(
        project, tmp_path):  # noqa: F811
    path = rule_file(tmp_path / "no-elementwise.py", "T901", "no-elementwise",
                     FORBID_ELEMENTWISE)
    code, data, md = propose(str(path), "--no-record", "--corpus", "corpus/valid/scale")
    assert code == 1
    valid = [f for f in data["flips"] if f["valid"]]
    assert valid and {f["evidence"]["simulator"]["status"] for f in valid} == {
        "confirmed legal"}
    assert "matched the reference" in valid[0]["evidence"]["simulator"]["detail"]
    assert f"simulator evidence on the flipped schedules: {len(valid)} confirmed legal" \
        in data["notes"]
    assert "| simulator | confirmed legal |" in md


@pytest.mark.slow
def test_a_catch_the_simulator_runs_correctly_blocks_as_label_looks_wrong(
        project, tmp_path):  # noqa: F811
    """A legal schedule labelled invalid (outside the corpus, as a motivating case): the
    new protocol rule 'catches' it, the simulator runs it correctly under every strategy,
    so the catch rests on the label alone and the proposal is blocked."""
    path = _labelled_legal_case(project, tmp_path, "mislabelled", "P090", "protocol")
    code, data, md = propose(str(path), "--no-record", "--corpus", "corpus/invalid/scale")
    assert code == 1
    [flip] = [f for f in data["flips"] if f["file"].endswith("mislabelled.cake")]
    assert flip["kinds"] == ["new_catch"]
    assert flip["evidence"]["simulator"]["status"] == "unconfirmed"
    [blocker] = [b for b in data["blockers"] if b["kind"] == "label-looks-wrong"]
    assert blocker["files"] == [flip["file"]] and blocker["rule"] == "P090"
    assert "the label looks wrong" in blocker["message"]
    assert "the simulator runs it correctly under every strategy" in md


@pytest.mark.slow
def test_a_resource_rule_is_not_judged_by_the_simulator(project, tmp_path):  # noqa: F811
    """The simulator does not model resource limits: a resource rule's catch that
    simulates correctly is unconfirmed, never a label-looks-wrong blocker."""
    path = _labelled_legal_case(project, tmp_path, "imagined_limit", "R090", "resources")
    _, data, _ = propose(str(path), "--no-record", "--corpus", "corpus/invalid/scale")
    [flip] = [f for f in data["flips"] if f["file"].endswith("imagined_limit.cake")]
    assert flip["evidence"]["simulator"]["status"] == "unconfirmed"
    assert not [b for b in data["blockers"] if b["kind"] == "label-looks-wrong"]
