"""How the artifact index lays its entries out: by the line of context.jsonl that holds them,
each entry whole, and the leftover the budget leaves out whole folded into the row of its
directory or of its command's program and file, where that names more.

Every entry that fits whole is written whole, so that a plain substring search of the context
for a path or a command finds it (the layout before groups names nothing this one does not).
What no longer fits whole may still fit folded: many of the artifacts a compaction drops share
a prefix, the files of one directory (`apps/x/src/teams/services/a.ts`, `.../b.ts`), the reads
of one file (`sed -n '1,200p' utils/a.ts`, `sed -n '200,400p' utils/a.ts`). What the model
reads:

    - line 41: ORD-58213 | /mnt/exports/a.csv | pytest -q
      - src/app/: a.py b.py
      - sed … utils/a.ts: -n '1,200p' | -n '200,400p'
    - on several lines:
      - src/lib/: c.py (line 9); d.py e.py (line 12)

- `- line 41: ...`: the entries of line 41 written whole;
- `  - src/app/: a.py b.py` under it: `src/app/a.py` and `src/app/b.py`, on line 41. A file
  name holds no blank (the path patterns allow none), so one space parts them;
- `  - sed … utils/a.ts: -n '1,200p' | -n '200,400p'`: `sed -n '1,200p' utils/a.ts` and
  `sed -n '200,400p' utils/a.ts`, on line 41;
- `- on several lines:`: the groups whose entries are on more than one line, each item
  followed by its line.

A folded entry alone in its group is written whole on its line's row: only a second member
makes a group row. A search of the context for a file's name, a directory or a command's
program and file finds its row; the whole path is the directory and the name read together
(the header says so), and the agent's Grep over context.jsonl finds it whole at the line the
row is under.

The budget is spent by an estimate kept as entries are added (each value's tokens and
separator, each row's head, each line's row, each rule the header needs), and the rendered
index is counted exactly (`ArtifactIndex.build` fills it to the budget so counted).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["IndexRows", "group_of", "group_pieces", "render_rows"]

LINE, DIRECTORY, COMMAND, SEVERAL = "line", "directory", "command", "several"


class FoundArtifact(Protocol):
    """What the layout reads of an artifact (`_artifacts.FoundArtifact`; declared here as a
    protocol so that this module imports nothing of the one that imports it)."""

    @property
    def kind(self) -> str: ...

    @property
    def value(self) -> str: ...

    def where(self) -> str: ...


_RULES = {
    DIRECTORY: "`dir/: a.py b.py` is dir/a.py and dir/b.py (Read or Grep the path so joined).",
    COMMAND: "`sed … f: -n 1p | -n 2p` is `sed -n 1p f` and `sed -n 2p f`.",
}
"""What the header says of each kind of group row, once the index holds one."""

SEVERAL_ROW = "- on several lines:"
_ELLIPSIS = " … "
# What a command's middle may not hold to be folded: the separators of a group row (a folded
# command is read back by splitting at them), and the marks of a cut or joined value.
_UNFOLDED = (" | ", "; ", " (", " ⏎ ", " […]", _ELLIPSIS)


def group_of(found: FoundArtifact, stored: str | None = None) -> tuple[str, str, str]:
    """The group an entry shares a row with: `(form, head, item)`.

    A path whose every character is one the path patterns allow in a name (no blank, not cut)
    goes to its directory's row, as its name; a command of three words or more, one line, to
    the row of its program and last word, as the words between; anything else is written
    whole on its line's row (`(LINE, value, value)`: a group of its own). So is a file the
    workspace stored (under the folder `stored`): the model reads it back by the path it
    copies from the index, and a name taken alone from a row would be read nowhere.
    """
    value = found.value
    if stored and value.startswith(stored):
        return LINE, value, value
    if found.kind == "path" and not any(c.isspace() for c in value):
        directory, slash, name = value.rpartition("/")
        if slash and directory and name and name not in (".", ".."):
            return DIRECTORY, directory + "/", name
    elif found.kind == "command" and value.isprintable() and "  " not in value:
        words = value.split(" ")
        middle = " ".join(words[1:-1])
        folds = len(words) >= 3 and all(words) and not words[0].endswith(":")
        if folds and not any(mark in middle for mark in _UNFOLDED):
            return COMMAND, f"{words[0]}{_ELLIPSIS}{words[-1]}", middle
    return LINE, value, value


@dataclass(slots=True)
class _Group:
    """The entries of one directory, one command's program and file, or one whole value."""

    form: str
    head: str
    members: list[tuple[str, str, str]] = field(default_factory=list)  # (item, where, value)
    lines: Counter[str] = field(default_factory=Counter)
    items: int = 0  # the tokens of its items
    marks: int = 0  # the tokens of its lines' marks, when it is on several lines

    @property
    def shape(self) -> str:
        """`LINE` (written whole on its line's row), the form of its row under its line, or
        `SEVERAL` (a row under `on several lines`)."""
        if len(self.members) == 1 or self.form == LINE:
            return LINE
        return self.form if len(self.lines) == 1 else SEVERAL


class IndexRows:
    """The groups of an index as entries are added to it, and the tokens its rows take
    (estimated: the index is counted whole at the end).

    Each entry is added whole (a group of its own, on its line's row) or `folded` into the
    row of its directory or of its command's program and file (`group_of`).

    Args:
        count: counts a text's tokens (each text counted once here).
        stored: the folder of the workspace's own files, which are written whole.
    """

    def __init__(self, count: Callable[[str], int], stored: str | None = None) -> None:
        self._counted: dict[str, int] = {}
        self._count = count
        self.stored = stored
        self._groups: dict[tuple[str, str], _Group] = {}
        self._placed: dict[tuple[str, str], tuple[str, str]] = {}  # each entry's group
        self._units: Counter[str] = Counter()  # rows under each line, its own row's values one
        self._forms: Counter[str] = Counter()  # group rows of each shape
        self.tokens = 0
        # Whether the header's rules for group rows are counted. Each is paid once, so no
        # single entry folded pays for it: a fill that folds leaves them out of what each entry
        # costs (and is counted whole after).
        self.count_rules = True

    @property
    def in_group_rows(self) -> int:
        """How many entries are in a group's row (not whole on their line's row)."""
        return sum(len(g.members) for g in self._groups.values() if g.shape != LINE)

    def _tokens(self, text: str) -> int:
        found = self._counted.get(text)
        if found is None:
            found = self._counted[text] = self._count(text)
        return found

    def _row_tokens(self, group: _Group) -> int:
        if group.shape == LINE:
            return self._tokens(group.members[0][2]) + 2
        head = self._tokens(f"  - {group.head}: ") + 1 + group.items
        return head + (group.marks if group.shape == SEVERAL else 0)

    def _count_in(self, group: _Group, sign: int) -> None:
        """Add (`sign` 1) or take away (-1) what `group` adds to the index as it stands."""
        if not group.members:
            return
        self.tokens += sign * self._row_tokens(group)
        shape = group.shape
        if shape != SEVERAL:
            where = group.members[0][1]
            self._units[where] += sign
            if self._units[where] == (1 if sign > 0 else 0):
                self.tokens += sign * (self._tokens(f"- {where}: ") + 1)
        if shape == LINE:
            return
        for form in {shape, group.form}:
            self._forms[form] += sign
            if self.count_rules and self._forms[form] == (1 if sign > 0 else 0):
                # A rule in the header for a form of row; the row `on several lines` (whose
                # items each say their line) needs none.
                rule = _RULES.get(form)
                self.tokens += sign * (self._tokens(rule or SEVERAL_ROW) + 1)

    def _append(self, group: _Group, item: str, where: str, value: str) -> None:
        group.members.append((item, where, value))
        group.items += self._tokens(item) + (1 if group.form == DIRECTORY else 2)
        group.lines[where] += 1
        if group.lines[where] == 1:
            group.marks += self._tokens(f" ({where});")

    def _pop(self, group: _Group) -> None:
        item, where, _ = group.members.pop()
        group.items -= self._tokens(item) + (1 if group.form == DIRECTORY else 2)
        group.lines[where] -= 1
        if not group.lines[where]:
            del group.lines[where]
            group.marks -= self._tokens(f" ({where});")

    def cost(self, found: FoundArtifact, folded: bool = False) -> int:
        """The tokens `found` would add to the index, whole or `folded` into its group."""
        before = self.tokens
        self.add(found, folded)
        added = self.tokens - before
        self.remove_last(found)
        return added

    def remove_last(self, found: FoundArtifact) -> None:
        """Take `found` back out: the entry added last to its group."""
        group = self._groups[self._placed.pop((found.kind, found.value))]
        self._count_in(group, -1)
        self._pop(group)
        self._count_in(group, 1)

    def add(self, found: FoundArtifact, folded: bool = False) -> list[str]:
        """Put `found` on its line's row, or in its group when `folded`; the texts the index
        now holds unbroken for it (another entry inside one of them is named by it)."""
        form, head, item = _placed(found, folded, self.stored)
        group = self._groups.get((form, head))
        if group is None:
            group = self._groups[(form, head)] = _Group(form, head)
        self._placed[(found.kind, found.value)] = (form, head)
        self._count_in(group, -1)
        self._append(group, item, found.where(), found.value)
        self._count_in(group, 1)
        return group_pieces(found, folded, self.stored)


def _placed(found: FoundArtifact, folded: bool, stored: str | None) -> tuple[str, str, str]:
    return group_of(found, stored) if folded else (LINE, found.value, found.value)


def group_pieces(found: FoundArtifact, folded: bool, stored: str | None = None) -> list[str]:
    """The texts the index holds unbroken for `found` in every shape its group may take: its
    value whole, or (`folded`) its directory and its name, or its command's program, middle
    and last word (its value whole is made of these). Another entry inside one of them is
    named by it."""
    form, head, item = _placed(found, folded, stored)
    if form == DIRECTORY:
        return [head, item]
    if form == COMMAND:
        program, _, last = head.partition(_ELLIPSIS)
        return [program, item, last]
    return [found.value]


def render_rows(
    entries: Sequence[FoundArtifact],
    folded: Container[tuple[str, str]],
    stored: str | None = None,
) -> tuple[list[str], list[str]]:
    """The index's rows for `entries` (in the index's order), those whose `(kind, value)` is
    in `folded` in their group's row, and the header's rules for the rows that are groups
    (`stored`: the folder of the workspace's own files)."""
    groups: dict[tuple[str, str], _Group] = {}
    for found in entries:
        form, head, item = _placed(found, (found.kind, found.value) in folded, stored)
        group = groups.setdefault((form, head), _Group(form, head))
        group.members.append((item, found.where(), found.value))
        group.lines[found.where()] += 1
    # Each line's row, then the rows under it, in the order of their first entry; the rows
    # on several lines last, under one row of their own.
    whole: dict[str, list[str]] = {}
    under: dict[str, list[str]] = {}
    several: list[str] = []
    shapes: set[str] = set()
    for group in groups.values():
        shape = group.shape
        where = group.members[0][1]
        if shape == LINE:
            for _, line, value in group.members:
                whole.setdefault(line, []).append(value)
                under.setdefault(line, [])
            continue
        shapes.update((shape, group.form))
        whole.setdefault(where, [])
        row = f"  - {group.head}: " + _items(group)
        (several if shape == SEVERAL else under.setdefault(where, [])).append(row)
    rows: list[str] = []
    for where, values in whole.items():
        rows.append(f"- {where}: " + " | ".join(values) if values else f"- {where}:")
        rows += under.get(where, [])
    if several:
        rows += [SEVERAL_ROW, *several]
    rules = [_RULES[shape] for shape in (DIRECTORY, COMMAND) if shape in shapes]
    return rows, rules


def _items(group: _Group) -> str:
    """A group row's items; on several lines, those of each line together and followed by
    it (`a.py b.py (line 4); c.py (line 9)`)."""
    joiner = " " if group.form == DIRECTORY else " | "
    if group.shape != SEVERAL:
        return joiner.join(item for item, _, _ in group.members)
    by_line: dict[str, list[str]] = {}
    for item, where, _ in group.members:
        by_line.setdefault(where, []).append(item)
    return "; ".join(f"{joiner.join(items)} ({where})" for where, items in by_line.items())
