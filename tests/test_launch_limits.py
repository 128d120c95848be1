"""Launch limits (issue 42): the targets' grid, block and cluster facts, rule R011
launch-limits, R008's non-portable opt-in, the `cluster_nonportable` keyword through the
parser, the lowering, the GPU launch plan and the mutation oracle."""

from __future__ import annotations

import shutil

import pytest

from cakegov.check.rulebook import Rulebook
from cakegov.check.runner import Checker
from cakegov.corpus.oracle import LAUNCH, outcome
from cakegov.ir.canonical import canonical_json
from cakegov.ir.parse import parse_bytes
from cakegov.sim.evidence import lower_any
from tests.conftest import CORPUS, ROOT

CLUSTER16 = CORPUS / "valid" / "gemm" / "cluster16_nonportable_s2.cake"
FLAT_X = CORPUS / "valid" / "scale" / "flat_grid_x.cake"
FLAT_Y = CORPUS / "invalid" / "scale" / "grid_y_over_limit.cake"


def _codes(checker: Checker, text: str, name: str = "t.cake") -> list[tuple[str, int]]:
    result = checker.check_bytes(text.encode(), name)
    return sorted((f.code, f.span.line) for f in result.findings if f.severity == "blocking")


@pytest.mark.parametrize("target", ["sm_80", "sm_90a", "sm_100a"])
def test_every_target_states_its_launch_limits_with_sources(rulebook, target):
    t = rulebook.targets[target]
    assert (t["grid_x_max"], t["grid_y_max"], t["grid_z_max"]) == (2**31 - 1, 65535, 65535)
    assert (t["block_x_max"], t["block_y_max"], t["block_z_max"]) == (1024, 1024, 64)
    assert t["cluster_max_nonportable"] >= t["cluster_max"]
    for key in ("grid_x_max", "grid_y_max", "block_z_max", "cluster_max_nonportable"):
        assert "cudaDeviceProp" in t.source(key) or "CU_FUNC_ATTRIBUTE" in t.source(key) \
            or "compute capability" in t.source(key), key


def test_a_zero_grid_extent_at_a_small_shape_is_rejected(checker):
    text = FLAT_X.read_text().replace("lm.launch(grid=(lm.cdiv(lm.M, TM) * NT,)",
                                      "lm.launch(grid=(lm.M // 512 * NT,)")
    findings = checker.check_bytes(text.encode(), "zero.cake").findings
    [found] = [f for f in findings if f.code == "R011"]
    assert "x-extent is 0: a launch needs at least one CTA" in found.message
    assert found.evidence["shape"]["M"] < 512 and "lm.cdiv" in found.hint


def test_the_y_limit_names_the_shape_and_the_axis_and_x_holds_it(checker):
    [found] = [f for f in checker.check_bytes(FLAT_Y.read_bytes(), "y.cake").findings
               if f.code == "R011"]
    assert found.evidence == {"axis": "y", "extent": 65536, "limit": 65535,
                              "shape": {"M": 4096, "N": 4096},
                              "source": found.evidence["source"]}
    assert "maxGridSize[1]" in found.evidence["source"]
    assert "put the largest extent on x" in found.hint
    assert _codes(checker, FLAT_X.read_text()) == []


def test_block_x_is_checked_where_it_is_stricter_than_threads_per_cta(tmp_path, workloads):
    rules = tmp_path / "rules"
    shutil.copytree(ROOT / "rules", rules, ignore=shutil.ignore_patterns("__pycache__"))
    path = rules / "targets" / "sm_90a.toml"
    text = path.read_text()
    start = text.index("value = 1024", text.index("[limits.block_x_max]"))
    path.write_text(text[:start] + "value = 256" + text[start + len("value = 1024"):])
    checker = Checker(Rulebook.load(rules), workloads)
    src = FLAT_X.read_text().replace("warps=4)", "warps=16)").replace(
        "range(0, 4)", "range(0, 16)")
    found = [f for f in checker.check_bytes(src.encode(), "b.cake").findings
             if f.code == "R011"]
    assert found and "512 threads along x" in found[0].message
    assert found[0].hint == "launch at most `warps=8`"


def test_the_nonportable_opt_in_parses_and_keeps_other_identities(rulebook, workloads):
    from cakegov.ir.parse import Vocabulary

    vocab = Vocabulary(primitives=rulebook.spellings(),
                       workloads={n: w.sig for n, w in workloads.items()})
    opted = parse_bytes(CLUSTER16.read_bytes(), vocab)
    assert opted.launch.cluster == (16, 1, 1) and opted.launch.cluster_nonportable
    assert '"cluster_nonportable":true' in canonical_json(opted)
    plain = parse_bytes(FLAT_X.read_bytes(), vocab)
    assert "cluster_nonportable" not in canonical_json(plain)  # identities unchanged
    bad = CLUSTER16.read_text().replace("cluster_nonportable=True", "cluster_nonportable=1")
    with pytest.raises(Exception, match="`cluster_nonportable` must be True or False"):
        parse_bytes(bad.encode(), vocab)


def test_r008_asks_for_the_opt_in_between_the_portable_and_the_nonportable_size(checker):
    text = CLUSTER16.read_text().replace(", cluster_nonportable=True", "")
    [found] = [f for f in checker.check_bytes(text.encode(), "c.cake").findings
               if f.code == "R008"]
    assert "at most 8 portably" in found.message
    assert found.hint.startswith("add `cluster_nonportable=True` to `lm.launch`")
    assert _codes(checker, CLUSTER16.read_text()) == []


def test_the_lowering_and_the_launch_plan_carry_the_opt_in(rulebook, workloads):
    from cakegov.gpu.run import launch_config
    from cakegov.lower.emit import emit_cuda

    kernel, workload, _schedule, why = lower_any(CLUSTER16.read_bytes(), CLUSTER16.name,
                                                 rulebook, workloads)
    assert kernel is not None, why
    assert kernel.cluster_nonportable
    text = emit_cuda(kernel, rulebook.primitives, verifier_digest="0" * 64).source
    assert "__cluster_dims__(16, 1, 1)" in text
    assert "cudaFuncAttributeNonPortableClusterSizeAllowed = 1" in " ".join(
        line.lstrip("/ ") for line in text.splitlines()[:12])
    config = launch_config(kernel, workload, {"M": 1024, "N": 256, "K": 256})
    assert config.cluster_nonportable and config.to_json()["cluster_nonportable"] is True
    plain, workload, _, _ = lower_any(FLAT_X.read_bytes(), FLAT_X.name, rulebook, workloads)
    assert not launch_config(plain, workload, {"M": 256, "N": 256}).cluster_nonportable
    assert "NonPortable" not in emit_cuda(plain, rulebook.primitives,
                                          verifier_digest="0" * 64).source


@pytest.mark.parametrize("path, detail", [
    (FLAT_Y, "the grid's y-extent is 65536"),
    (CORPUS / "invalid" / "gemm" / "cluster32_over_nonportable.cake",
     "a cluster of 32 CTAs, the target allows 16 (cluster_max_nonportable)"),
])
def test_the_oracle_sees_the_launch_fail_without_the_checker(rulebook, workloads, path,
                                                              detail):
    found = outcome(path.read_bytes(), path.name, rulebook, workloads)
    assert found.kind == LAUNCH and detail in found.detail, found


def test_a_shape_too_large_to_generate_is_not_simulated_rather_than_a_crash(rulebook,
                                                                             workloads):
    from cakegov.sim.evidence import simulate_evidence

    path = CORPUS / "invalid" / "scale" / "grid_x_2pow31.cake"
    found = simulate_evidence(path.read_bytes(), path.name, rulebook, workloads)
    assert found["status"] != "correct"
    assert "137,438,953,472 elements, over the 268,435,456 generated here" in \
        str(found["detail"])
