"""`cakegov rules new`: the files a new rule starts from, consistent with each other.

A new rule is one file under `rules/checks/` plus its corpus case (STYLE.md). The scaffold
writes both so that every test that reads them can judge them at once:

- the rule file has the constants the loader requires, `STATUS = "preview"` (as a
  proposal starts, examples/proposals/fragment-owner.py), the next free `CODE` of its
  category's letter series, and the four docstring sections, whose examples quote the
  generated case and the valid schedule it was copied from verbatim;
- the corpus case is a real schedule: a copy of a valid schedule of the chosen workload,
  renamed, with `# expect: CODE` on the first statement of its first role body. It parses
  and the rest of the rulebook accepts it.

The label is the rule's specification, not a placeholder the tests skip: until the case is
edited to have the defect at the labelled line and `check(ctx)` reports it there,
tests/test_corpus.py and tests/test_rule_docs.py fail on it, naming the file. That red
test is the first step of writing the rule; nothing here fakes a finding."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from cakegov.corpus.labels import LabelError, read_labels

CODE_NUMBER = re.compile(r"^([A-Z]{1,3})([0-9]{3})$")
RESERVED_FROM = 90  # P098/P099 style engine codes live at the top of a series
_CODE_CONST = re.compile(r'^CODE\s*=\s*"([A-Z]{1,3}[0-9]{3})"', re.M)


class ScaffoldError(Exception):
    """The scaffold cannot be written as asked; the message says why."""


@dataclass(frozen=True)
class Scaffold:
    """What `rules new` writes: paths and contents, decided before anything is written."""

    code: str
    rule_path: Path
    rule_text: str
    case_path: Path
    case_text: str
    label_line: int
    passing_path: Path


def claimed_codes(root: Path) -> set[str]:
    """Codes of pending proposals (examples/proposals/*.py): not free for a new rule."""
    out: set[str] = set()
    for path in sorted((root / "examples" / "proposals").glob("*.py")):
        try:
            out.update(_CODE_CONST.findall(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            continue
    return out


def next_code(letters: str, taken: set[str]) -> str:
    """The code after the highest one of the `letters` series below the reserved top."""
    numbers = [int(m.group(2)) for m in map(CODE_NUMBER.match, taken)
               if m and m.group(1) == letters and int(m.group(2)) < RESERVED_FROM]
    number = max(numbers, default=0) + 1
    while f"{letters}{number:03d}" in taken:
        number += 1
    if number >= RESERVED_FROM:
        raise ScaffoldError(f"the {letters} series is full below {letters}{RESERVED_FROM:03d}; "
                            "pass --code")
    return f"{letters}{number:03d}"


def series_of(category: str, rules: list[tuple[str, str]]) -> str:
    """The letter series of `category` from the rules that have it: (code, category)."""
    letters = {CODE_NUMBER.match(code).group(1) for code, cat in rules
               if cat == category and CODE_NUMBER.match(code)}
    if len(letters) != 1:
        known = sorted({cat for _, cat in rules})
        raise ScaffoldError(f"no code series for category {category!r}; known categories: "
                            f"{', '.join(known)} (or pass --code for a new series)")
    return letters.pop()


def _passing_schedule(corpus: Path, workload: str) -> Path:
    """The shortest valid schedule of `workload`: the scaffolded case starts as a copy."""
    folder = corpus / "valid" / workload
    candidates = []
    for path in sorted(folder.glob("*.cake")):
        text = path.read_text(encoding="utf-8")
        try:
            if read_labels(text, str(path)).clean:
                candidates.append((len(text.splitlines()), path))
        except LabelError:
            continue
    if not candidates:
        known = sorted(p.name for p in (corpus / "valid").iterdir() if p.is_dir())
        raise ScaffoldError(f"no valid schedule of workload {workload!r} under {folder}; "
                            f"workloads with valid schedules: {', '.join(known)}")
    return min(candidates)[1]


def _case(source: str, passing_rel: str, name: str, code: str) -> tuple[str, int, str]:
    """The case text, the labelled line (1-based) and that line stripped of its label."""
    lines = source.splitlines()
    body_start = next((i for i, ln in enumerate(lines) if ln.startswith("@cake.schedule")),
                      None)
    if body_start is None:
        raise ScaffoldError(f"{passing_rel}: no @cake.schedule line")
    kept = [ln for ln in lines[body_start:] if ln.strip() != "# expect: clean"]
    func = name.replace("-", "_")
    kept = [re.sub(r"^def \w+\(", f"def {func}(", ln) for ln in kept]
    doc = [
        f'"""Scaffolded by `cakegov rules new {name}`: still the valid schedule',
        f"{passing_rel}, renamed. Edit it so that it has the defect the rule catches on the",
        f"line labelled `# expect: {code}` (move the label if the defect belongs elsewhere),",
        f"then describe the defect here. Until {code} reports that line, tests/test_corpus.py",
        'fails on this file."""',
    ]
    text_lines = doc + kept
    with_at = next((i for i, ln in enumerate(text_lines) if re.match(r"^\s+with \w+:", ln)),
                   None)
    if with_at is None or with_at + 1 >= len(text_lines):
        raise ScaffoldError(f"{passing_rel}: no role body to label")
    label_at = with_at + 1
    statement = text_lines[label_at].rstrip()
    text_lines[label_at] = f"{statement}  # expect: {code}"
    return "\n".join(text_lines) + "\n", label_at + 1, statement.strip()


def _rule_text(*, name: str, code: str, category: str, severity: str, case_rel: str,
               labelled: str, passing_rel: str, passing_line: str) -> str:
    return f'''"""TODO: one line: what {name} rejects.

## What it does
TODO: which nodes, calls or fields the rule looks at, and what it reports (the node, the
resource and the condition every finding names).

## Why is this bad?
TODO: what goes wrong on the GPU when a schedule does this (hang, race, wrong result),
with a reference to the PTX ISA or the CUDA guide.

## Failing example
`{case_rel}`:
```python
{labelled}  # expect: {code}
```

## Passing example
`{passing_rel}`:
```python
{passing_line}
```
"""

CODE = "{code}"
NAME = "{name}"
VERSION = "0.1.0"
SEVERITY = "{severity}"
CATEGORY = "{category}"
STATUS = "preview"  # a new rule starts as preview; `check --preview` runs it
MOTIVATED_BY = ("{case_rel}",)


def check(ctx):
    """Yield `ctx.finding(span, message, condition=..., hint=...)` for each violation."""
    yield from ()
'''


def plan(root: Path, *, name: str, category: str, severity: str, workload: str,
         rules: list[tuple[str, str]], code: str | None = None) -> Scaffold:
    """Decide every path and content of a new rule `name`; nothing is written.

    `rules`: (code, category) of every rule in the rulebook."""
    from cakegov.check.rulebook import CODE_RE, NAME_RE, SEVERITIES

    if not NAME_RE.match(name):
        raise ScaffoldError(f"rule name {name!r} must be kebab-case, like `fragment-owner`")
    if severity not in SEVERITIES:
        raise ScaffoldError(f"--severity must be one of {', '.join(SEVERITIES)}")
    taken = {c for c, _ in rules} | claimed_codes(root)
    if code is None:
        code = next_code(series_of(category, rules), taken)
    else:
        code = code.upper()
        if not CODE_RE.match(code) or code.startswith("E"):
            raise ScaffoldError(f"--code {code!r} is not like `R010` (E codes are input "
                                "errors)")
        if code in taken:
            raise ScaffoldError(f"--code {code} is taken")
    rule_path = root / "rules" / "checks" / f"{name}.py"
    case_path = root / "corpus" / "invalid" / workload / f"{name.replace('-', '_')}.cake"
    for path in (rule_path, case_path):
        if path.exists():
            raise ScaffoldError(f"{path.relative_to(root)} exists; pick another name")
    passing = _passing_schedule(root / "corpus", workload)
    passing_rel = passing.relative_to(root).as_posix()
    case_rel = case_path.relative_to(root).as_posix()
    source = passing.read_text(encoding="utf-8")
    case_text, label_line, labelled = _case(source, passing_rel, name, code)
    passing_line = labelled if labelled in source else source.splitlines()[-1].strip()
    return Scaffold(
        code=code, rule_path=rule_path, case_path=case_path, case_text=case_text,
        label_line=label_line, passing_path=passing,
        rule_text=_rule_text(name=name, code=code, category=category, severity=severity,
                             case_rel=case_rel, labelled=labelled, passing_rel=passing_rel,
                             passing_line=passing_line),
    )


def write(scaffold: Scaffold) -> list[Path]:
    """Create the rule file and the corpus case (never overwriting); the paths written."""
    from cakegov.fsio import atomic_write

    written = []
    for path, text in ((scaffold.rule_path, scaffold.rule_text),
                       (scaffold.case_path, scaffold.case_text)):
        if path.exists():
            raise ScaffoldError(f"{path} exists")
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, text)
        written.append(path)
    return written
