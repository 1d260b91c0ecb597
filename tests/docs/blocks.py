"""The code blocks of README.md and docs/, as the tests that run them read them.

Conventions (an annotation is an HTML comment on the line right before a fence; it does not
show in the rendered page):

- ```` ```python ```` blocks run, each on its own as a script, offline, in a fresh temporary
  folder as the current directory: each block is complete (its imports, its set-up), since a
  reader copies one block, not the page. There is no annotation to continue an earlier block.
- `<!-- test: skip -- REASON -->` leaves a block out; the reason is required and says why it
  cannot run here (few blocks should need it).
- `<!-- test: server -->` runs a Python block with `OPENAI_BASE_URL` set to a local
  OpenAI-compatible server the test starts; the block reads it from the environment.
- `<!-- test: output -->` on a ```` ```text ```` block right after a Python block: the text
  that block prints, compared line by line; a line `...` stands for any lines, and `...`
  inside a line for any text.
- ```` ```console ```` blocks are a CLI session: each `$ ` line is a command (run through a
  shell in a demo workspace at a temporary path, which the expected output writes as
  `/tmp/demo`), and the lines up to the next `$ ` are its expected output, compared as
  above.
- Other fences (```` ```bash ````, ```` ```text ````, ```` ```json ````...) are shown, not run.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository: README.md and docs/ are read from here."""

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
_ANNOTATION = re.compile(r"^\s*<!--\s*test:\s*(?P<what>[a-z]+)(?:\s*--\s*(?P<why>.*?))?\s*-->\s*$")
_KINDS = frozenset({"skip", "server", "output"})
_GONE = {
    "continues": (
        "each block runs alone, as a reader copies it: give this block the imports and the "
        "set-up it took from the block before"
    )
}


@dataclass
class Block:
    """One fenced block of a page."""

    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    annotations: dict[str, str] = field(default_factory=dict)
    output: Block | None = None  # a `test: output` text block that follows a Python block

    @property
    def where(self) -> str:
        """`page:line`, relative to the repository where it lies there, for test ids and
        failures."""
        page = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{page}:{self.line}"


def pages() -> list[Path]:
    """README.md and every Markdown page of docs/, sorted."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, each with its annotations; a `test: output` block is
    attached to the Python block before it and not listed on its own.

    Raises:
        ValueError: an unknown annotation, a skip without a reason, an annotation not
            followed by a fence, or an unclosed fence: a page the tests cannot read right.
    """
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    pending: dict[str, str] = {}
    index = 0
    while index < len(lines):
        text = lines[index]
        note = _ANNOTATION.match(text)
        if note is not None:
            what = note.group("what")
            if what in _GONE:
                raise ValueError(f"{page}:{index + 1}: 'test: {what}' is gone: {_GONE[what]}")
            if what not in _KINDS:
                raise ValueError(f"{page}:{index + 1}: unknown annotation 'test: {what}'")
            if what == "skip" and not (note.group("why") or "").strip():
                raise ValueError(f"{page}:{index + 1}: 'test: skip' needs '-- the reason'")
            pending[what] = (note.group("why") or "").strip()
            index += 1
            continue
        fence = _FENCE.match(text)
        if fence is None:
            if pending and text.strip():
                raise ValueError(
                    f"{page}:{index + 1}: an annotation must come right before a fence"
                )
            index += 1
            continue
        marker, indent = fence.group("fence"), len(fence.group("indent"))
        language = fence.group("info").strip().split(" ")[0].lower()
        body: list[str] = []
        index += 1
        while index < len(lines) and not (
            lines[index].strip().startswith(marker) and lines[index].strip().strip(marker[0]) == ""
        ):
            body.append(
                lines[index][indent:] if lines[index][:indent].strip() == "" else lines[index]
            )
            index += 1
        if index >= len(lines):
            raise ValueError(f"{page}:{found[-1].line if found else 0}: a fence is never closed")
        block = Block(page, index - len(body), language, "\n".join(body) + "\n", pending)
        pending = {}
        index += 1
        if "output" in block.annotations:
            previous = found[-1] if found else None
            if previous is None or previous.language != "python" or previous.output is not None:
                raise ValueError(f"{block.where}: 'test: output' must follow a Python block")
            previous.output = block
            continue
        found.append(block)
    if pending:
        raise ValueError(f"{page}: an annotation at the end of the page annotates nothing")
    return found


def matches(expected: str, actual: str) -> bool:
    """Whether `actual` fits `expected` line by line, where a line `...` stands for any
    lines (none included) and `...` inside a line for any text."""
    want = expected.rstrip("\n").splitlines()
    got = actual.rstrip("\n").splitlines()

    def line_fits(pattern: str, line: str) -> bool:
        if "..." not in pattern:
            return pattern.rstrip() == line.rstrip()
        parts = [re.escape(p) for p in pattern.rstrip().split("...")]
        return re.fullmatch(".*".join(parts), line.rstrip(), re.DOTALL) is not None

    @functools.cache
    def fits(i: int, j: int) -> bool:
        if i == len(want):
            return j == len(got)
        if want[i].strip() == "...":
            return any(fits(i + 1, k) for k in range(j, len(got) + 1))
        return j < len(got) and line_fits(want[i], got[j]) and fits(i + 1, j + 1)

    return fits(0, 0)
