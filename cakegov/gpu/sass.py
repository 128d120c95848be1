"""Read the machine code of a compiled kernel: `cuobjdump -sass` on a cubin, its
instruction mnemonics, and checks of what must (and must not) appear.

cuobjdump comes from the `nvidia-cuda-cuobjdump` wheel (the `nvrtc` extra) or a CUDA
toolkit on PATH; with neither, `cuobjdump_path()` is None and callers skip. No GPU is
needed: the cubin is read, never loaded.

The expectations are data (`SassExpectation`, `LOWERING_SASS`): which mnemonics must appear
(`UTMALDG` where a schedule loads through tensor maps, `UTMASTG` where it stores through
them, `UBLKCP` where copies stay row-wise `cp.async.bulk`, `HGMMA` where `mma_async` lowers
to wgmma, `SYNCS` for mbarrier operations) and which must not (the local-memory accesses
`LDL` / `STL` of register spills)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

SPILL_MNEMONICS = ("LDL", "STL")  # local-memory loads/stores: spills or stack arrays

# `/*0070*/   @!P0 SYNCS.EXCH.64 URZ, [UR4], UR6 ;` -> "SYNCS.EXCH.64"
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:\{\s*)?(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


class SassUnavailable(Exception):
    """No cuobjdump: SASS cannot be read on this machine."""


def cuobjdump_path() -> str | None:
    """cuobjdump from the nvidia-cuda-cuobjdump wheel, else from PATH, else None. It
    disassembles through nvdisasm (the nvidia-cuda-nvdisasm wheel), which must sit beside
    it or on PATH."""
    candidates = []
    for entry in sys.path:
        for sub in ("cu13", "cuda_cuobjdump"):
            candidates.append(Path(entry) / "nvidia" / sub / "bin" / "cuobjdump")
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK) and (path.parent / "nvdisasm").is_file():
            return str(path)
    found = shutil.which("cuobjdump")
    return found if found and shutil.which("nvdisasm") else None


def disassemble(cubin: bytes, tool: str | None = None, timeout_s: float = 60.0) -> str:
    """The `cuobjdump -sass` listing of a cubin."""
    tool = tool or cuobjdump_path()
    if tool is None:
        raise SassUnavailable("cuobjdump is not installed (pip install nvidia-cuda-cuobjdump, "
                              "or a CUDA toolkit on PATH)")
    with tempfile.TemporaryDirectory(prefix="cakegov-sass-") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        # cuobjdump runs nvdisasm; the wheels install both in one bin directory
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join([str(Path(tool).parent), env.get("PATH", "")])
        done = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True,
                              timeout=timeout_s, check=False, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"cuobjdump failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def mnemonics(listing: str) -> list[str]:
    """Full mnemonics (opcode with modifiers, e.g. `SYNCS.ARRIVE.TRANS64.A1T0`) in order."""
    out = []
    for line in listing.splitlines():
        match = _INSTRUCTION.match(line)
        if match:
            out.append(match.group(1))
    return out


def opcodes(names: Iterable[str]) -> Counter[str]:
    """Counts of base opcodes (the part before the first dot)."""
    return Counter(n.split(".", 1)[0] for n in names)


@dataclass(frozen=True)
class SassExpectation:
    """What a kernel's SASS must contain (`present`: base opcodes, each at least once)
    and must not (`absent`)."""

    present: tuple[str, ...] = ()
    absent: tuple[str, ...] = SPILL_MNEMONICS
    why: dict[str, str] = field(default_factory=dict)  # opcode -> the schedule's reason


def check_sass(names: Sequence[str], expect: SassExpectation) -> list[str]:
    """Violations, one sentence each (empty: the SASS meets the expectation)."""
    counts = opcodes(names)
    problems = []
    for op in expect.present:
        if counts[op] == 0:
            reason = expect.why.get(op, "")
            problems.append(f"no {op} instruction" + (f" although {reason}" if reason else ""))
    for op in expect.absent:
        if counts[op]:
            problems.append(f"{counts[op]} {op} instruction(s)"
                            + (" (local-memory spills)" if op in SPILL_MNEMONICS else ""))
    return problems


# What each lowering must show in the SASS, with the reason: keyed by the lowered op's
# kind or primitive and the path the lowering chose (cakegov/lower/kernel.py).
LOWERING_SASS: dict[tuple[str, str], tuple[str, str]] = {
    ("copy", "tma"): ("UTMALDG", "the schedule loads through tensor maps "
                                 "(cp.async.bulk.tensor)"),
    ("copy", "rowwise"): ("UBLKCP", "the schedule loads with row-wise cp.async.bulk"),
    ("store_async", "tma"): ("UTMASTG", "the schedule stores through tensor maps "
                                        "(cp.async.bulk.tensor)"),
    ("store_async", "rowwise"): ("UBLKCP", "the schedule stores with row-wise "
                                           "cp.async.bulk"),
    ("mma_async", "wgmma"): ("HGMMA", "mma_async lowers to wgmma.mma_async"),
}
BARRIER_SASS = ("SYNCS", "the schedule uses mbarriers")


def _ops(body: Iterable[object]) -> Iterable[object]:
    for op in body:
        yield op
        inner = getattr(op, "body", None)
        if inner is not None:
            yield from _ops(inner)


def _lowering(op: object) -> tuple[str, str] | None:
    """The LOWERING_SASS key of one lowered op (None: nothing to expect)."""
    kind = getattr(op, "kind", None)
    if kind == "copy":
        return ("copy", "tma" if getattr(op, "tma", None) is not None else "rowwise")
    if kind != "compute":
        return None
    primitive = getattr(op, "primitive", "")
    if primitive == "store_async":
        return (primitive, "tma" if getattr(op, "tma", None) is not None else "rowwise")
    if primitive == "mma_async" and getattr(op, "wgmma", None) is not None:
        return (primitive, "wgmma")
    return None


def expected_sass(kernel: object) -> SassExpectation:
    """What the SASS of a lowered kernel (cakegov/lower/kernel.py) must contain: the
    opcodes of LOWERING_SASS for the paths its copies, stores and MMAs took, SYNCS where
    it has mbarriers; never a spill."""
    why: dict[str, str] = {}
    for role in getattr(kernel, "roles", ()):
        for op in _ops(role.body):
            key = _lowering(op)
            if key is not None and key in LOWERING_SASS:
                why.setdefault(*LOWERING_SASS[key])
    if getattr(kernel, "barriers", ()):
        why.setdefault(*BARRIER_SASS)
    return SassExpectation(present=tuple(why), why=why)
