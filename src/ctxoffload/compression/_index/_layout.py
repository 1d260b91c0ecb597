"""How the artifact index lays its entries out: by the line of context.jsonl that holds them,
each entry whole, and the entries the budget holds only folded in the row of their command's
program and file, or in the tree of their directories (`_path_tree`).

Whole where the budget allows: a plain substring search of the context for a path or a
command finds an entry written whole. What no longer fits whole may still fit folded: many of
the artifacts a compaction drops share a prefix, the files of a listing
(`apps/x/src/teams/services/a.ts`, `.../b.ts`), the reads of one file (`sed -n '1,200p'
utils/a.ts`, `sed -n '200,400p' utils/a.ts`). `ArtifactIndex.build` names the most the
budget holds folded, then keeps as many of them whole as it still holds; a folded entry is
found by its name (a path's end, a command's file) and read whole from its row. What the
model reads:

    - line 41: ORD-58213 /mnt/exports/a.csv | pytest -q
      - sed … utils/a.ts: -n '1,200p' | -n '200,400p'
    - on several lines:
      - grep … src/a.py: -n x (line 9) | -n y (line 12)
    - src/app/ (line 41): a.py b.py lib/c.py
      - models/ (lines 9, 12): d.py e.py

- `- line 41: ...`: the entries of line 41 written whole, a blank apart, and ` | ` before
  each one holding a blank (or a `|`);
- `  - sed … utils/a.ts: -n '1,200p' | -n '200,400p'` under it: `sed -n '1,200p' utils/a.ts`
  and `sed -n '200,400p' utils/a.ts`, on line 41;
- `- on several lines:`: the command rows whose entries are on more than one line, each item
  followed by its line;
- `- src/app/ (line 41): a.py b.py lib/c.py` and the rows under it: the tree of paths, each
  row's head the directory its items (and the rows under it) go on from; it names the
  folders on its paths' way too, and leaves a leading `./` off.

A folded command alone in its group is written whole on its line's row: only a second member
makes a group row; a path no tree row pays for is written whole too (`_path_tree`).

The layout before groups is spent by an estimate kept as entries are added (`IndexRows`:
each value's tokens and separator, each line's row), and every index is counted exactly
(`ArtifactIndex.build` fills it to the budget so counted).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Container, Sequence
from typing import Protocol

from ._path_tree import TREE_RULE, in_tree, placed, tree_rows

__all__ = [
    "COMMAND_RULE",
    "IndexRows",
    "Layouts",
    "goes_in_tree",
    "group_of",
    "group_pieces",
    "render_rows",
]

LINE, COMMAND = "line", "command"


class FoundArtifact(Protocol):
    """What the layout reads of an artifact (`_artifacts.FoundArtifact`; declared here as a
    protocol so that this module imports nothing of the one that imports it)."""

    @property
    def kind(self) -> str: ...

    @property
    def value(self) -> str: ...

    @property
    def stored(self) -> bool: ...

    def where(self) -> str: ...


COMMAND_RULE = (
    "A command's row lists variants: `sed … f: -n 1p | -n 2p` means `sed -n 1p f` and "
    "`sed -n 2p f`."
)
"""What the header says of a command's group row, once the index holds one."""

SEVERAL_ROW = "- on several lines:"
_ELLIPSIS = " … "
# What a command's middle may not hold to be folded: the separators of a group row (a folded
# command is read back by splitting at them), and the marks of a cut or joined value.
_UNFOLDED = (" | ", "; ", " (", " ⏎ ", " […]", _ELLIPSIS)


def group_of(found: FoundArtifact) -> tuple[str, str, str]:
    """The group an entry shares a row with: `(form, head, item)`.

    A command of three words or more, one line, goes to the row of its program and last
    word, as the words between; anything else is written whole on its line's row (`(LINE,
    value, value)`: a group of its own; a path folded goes to the tree of `_path_tree`, which
    `in_tree` says). So is a file the workspace stored (`stored`): the model reads it back by
    the path it copies from the index.
    """
    value = found.value
    if found.stored:
        return LINE, value, value
    if found.kind == "command" and value.isprintable() and "  " not in value:
        words = value.split(" ")
        middle = " ".join(words[1:-1])
        folds = len(words) >= 3 and all(words) and not words[0].endswith(":")
        if folds and not any(mark in middle for mark in _UNFOLDED):
            return COMMAND, f"{words[0]}{_ELLIPSIS}{words[-1]}", middle
    return LINE, value, value


class IndexRows:
    """The entries of an index written whole, as they are added to it, and the tokens their
    rows take, estimated: each value counted with the blank or ` | ` before it, each line's
    row head with its line break. An encoding that cuts its pieces at those blanks (o200k,
    cl100k) counts the rows whole the same but at a row's end, where a run of signs takes the
    line break into its last piece: a token or two fewer there, or, for a few runs, one more
    (within two tokens a row either way; it was a fifth over when each value was counted
    bare, a token added for its blank). The index is counted whole at the end.

    Args:
        count: counts a text's tokens (each text counted once here).
    """

    def __init__(self, count: Callable[[str], int]) -> None:
        self._counted: dict[str, int] = {}
        self._count = count
        self._values: Counter[str] = Counter()  # the values on each line's row
        self._added: list[tuple[str, int]] = []  # each entry's line and tokens, in order
        # Each entry's line, its value's tokens and separator, and its line's row's tokens
        # (by its identity: the entry is held with them, so that its identity stays its own).
        self._parts: dict[int, tuple[FoundArtifact, str, int, int]] = {}
        self.tokens = 0

    def _tokens(self, text: str) -> int:
        found = self._counted.get(text)
        if found is None:
            found = self._counted[text] = self._count(text)
        return found

    def _parts_of(self, found: FoundArtifact) -> tuple[FoundArtifact, str, int, int]:
        parts = self._parts.get(id(found))
        if parts is None:
            where, value = found.where(), found.value
            own = self._tokens((" " if is_word(value) else " | ") + value)
            row = self._tokens(f"- {where}:") + 1
            parts = self._parts[id(found)] = (found, where, own, row)
        return parts

    def cost(self, found: FoundArtifact) -> int:
        """The tokens `found` would add to the index, written whole on its line's row."""
        _, where, own, row = self._parts_of(found)
        return own if self._values[where] else own + row

    def add(self, found: FoundArtifact) -> None:
        """Write `found` whole on its line's row."""
        _, where, own, row = self._parts_of(found)
        cost = own if self._values[where] else own + row
        self._values[where] += 1
        self._added.append((where, cost))
        self.tokens += cost

    def remove(self, position: int) -> None:
        """Take the entry added `position`-th (0 the first) back out."""
        where, cost = self._added.pop(position)
        self._values[where] -= 1
        self.tokens -= cost

    def remove_last(self) -> None:
        """Take the entry added last back out."""
        where, cost = self._added.pop()
        self._values[where] -= 1
        self.tokens -= cost


def group_pieces(found: FoundArtifact, folded: bool) -> list[str]:
    """The texts the index holds unbroken for `found`: its value whole, or (`folded`) its
    command's program, middle and last word, or the name at its path's end (the rest of a
    path in the tree may be in a row above). Another entry inside one of them is named by
    it."""
    if not folded:
        return [found.value]
    form, head, item = group_of(found)
    if form == COMMAND:
        program, _, last = head.partition(_ELLIPSIS)
        return [program, item, last]
    if goes_in_tree(found):
        return [found.value.rpartition("/")[2]]
    return [found.value]


def goes_in_tree(found: FoundArtifact) -> bool:
    """Whether `found`, folded, goes in the tree of paths (`_path_tree`): a path it can write
    (`in_tree`) that is not a file the workspace stored (`stored`: the model reads one back by
    the path it copies whole from the index)."""
    return found.kind == "path" and not found.stored and in_tree(found.value)


class Layouts:
    """What `render_rows` works out once per entry and per line's row, kept for the renders
    of one index's search (which render the same entries again and again, a few more or
    fewer each time): each entry's line, group and place in the tree, each row of a line's
    values. What it renders is what `render_rows` renders without it.

    It holds the entries it has seen (their identity is its key), so it is made for one
    build of an index and dropped after it.
    """

    def __init__(self) -> None:
        self._entries: dict[int, _Laid] = {}
        self._rows: dict[tuple[str, tuple[str, ...]], str] = {}
        # The trees of paths rendered (a fifth of a search's renders fold the same paths as
        # one before, with other entries beside them).
        self._trees: dict[tuple[tuple[str, str], ...], tuple[list[str], list[tuple[str, str]]]]
        self._trees = {}

    def of(self, found: FoundArtifact) -> _Laid:
        """What `found` is in a layout (worked out the first time it is asked)."""
        laid = self._entries.get(id(found))
        if laid is None:
            laid = self._entries[id(found)] = _Laid(found)
        return laid

    def line_row(self, where: str, values: list[str]) -> str:
        """`- {where}:` and `line_values(values)`."""
        key = (where, tuple(values))
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = f"- {where}:" + line_values(values)
        return row

    def tree(
        self, paths: list[tuple[str, str]], parts: list[list[str]]
    ) -> tuple[list[str], list[tuple[str, str]]]:
        """`tree_rows(paths, parts)`, worked out once for the same paths (read only).

        The rows of the paths under each first folder are those of these paths alone, in
        the order of their first path (`tree_rows`): each such tree is worked out once too,
        so that a render that adds paths under one folder works out only that folder's
        again (the renders of a search add and take away paths at the end of the order)."""
        key = tuple(paths)
        tree = self._trees.get(key)
        if tree is not None:
            return tree
        firsts: dict[str, tuple[list[tuple[str, str]], list[list[str]]]] = {}
        for path, split in zip(paths, parts, strict=True):
            under = firsts.get(split[0])
            if under is None:
                firsts[split[0]] = ([path], [split])
            else:
                under[0].append(path)
                under[1].append(split)
        if len(firsts) <= 1:
            tree = tree_rows(paths, parts)
        else:
            rows: list[str] = []
            whole: list[tuple[str, str]] = []
            for under_paths, under_parts in firsts.values():
                under_rows, under_whole = self.tree(under_paths, under_parts)
                rows += under_rows
                whole += under_whole
            tree = (rows, whole)
        self._trees[key] = tree
        return tree


class _Laid:
    """An entry as `render_rows` places it: its key, its line, its group written whole and
    folded (`group_of`), and whether it goes in the tree folded (`goes_in_tree`)."""

    __slots__ = (
        "fold_group",
        "fold_member",
        "found",
        "key",
        "line_group",
        "line_member",
        "tree",
        "tree_parts",
        "value",
        "where",
    )

    def __init__(self, found: FoundArtifact) -> None:
        self.found = found  # (held, so that its identity stays its own while it is a key)
        value, where = found.value, found.where()
        self.value, self.where = value, where
        self.key = (found.kind, value)
        self.line_group = (LINE, value)
        self.line_member = (value, where, value)
        self.tree: tuple[str, str] | None = None
        self.tree_parts: list[str] = []
        if goes_in_tree(found):
            self.tree = (value, where)
            self.tree_parts = placed(value).split("/")
            self.fold_group, self.fold_member = self.line_group, self.line_member
        else:
            form, head, item = group_of(found)
            self.fold_group, self.fold_member = (form, head), (item, where, value)


def render_rows(
    entries: Sequence[FoundArtifact],
    folded: Container[tuple[str, str]],
    layouts: Layouts | None = None,
) -> tuple[list[str], list[str]]:
    """The index's rows for `entries` (in the index's order), those whose `(kind, value)` is
    in `folded` in their command's row or in the tree of paths, and the header's rules for
    the rows that are groups (`layouts`: what earlier renders of the same index worked
    out)."""
    layouts = layouts or Layouts()
    if not folded:
        return _whole_rows(entries, layouts), []
    # The entries of each group (`group_of`), in the order of the group's first entry: a
    # value written whole is a group of its own, `(LINE, value)`.
    groups: dict[tuple[str, str], list[tuple[str, str, str]]] = {}  # (item, where, value)
    paths: list[tuple[str, str]] = []
    parts: list[list[str]] = []  # (each path's, split at its `/`)
    of = layouts.of
    for found in entries:
        laid = of(found)
        if laid.key not in folded:
            group, member = laid.line_group, laid.line_member
        elif laid.tree is not None:
            paths.append(laid.tree)
            parts.append(laid.tree_parts)
            continue
        else:
            group, member = laid.fold_group, laid.fold_member
        members = groups.get(group)
        if members is None:
            groups[group] = [member]
        else:
            members.append(member)
    tree, alone = layouts.tree(paths, parts)
    for value, where in alone:
        groups.setdefault((LINE, value), []).append((value, where, value))
    # Each line's row, then the rows under it, in the order of their first entry; the rows
    # on several lines next, under one row of their own; the tree of paths last. A group of
    # one, or of values written whole, is on its line's row.
    whole: dict[str, list[str]] = {}
    under: dict[str, list[str]] = {}
    several: list[str] = []
    for (form, head), members in groups.items():
        if len(members) == 1 or form == LINE:
            for _, line, value in members:
                values = whole.get(line)
                if values is None:
                    whole[line] = [value]
                else:
                    values.append(value)
            continue
        where = members[0][1]
        lines = {line for _, line, _ in members}
        if len(lines) > 1:
            several.append(f"  - {head}: " + _items_by_line(members))
        else:
            whole.setdefault(where, [])
            under.setdefault(where, []).append(
                f"  - {head}: " + " | ".join(item for item, _, _ in members)
            )
    rows: list[str] = []
    line_row = layouts.line_row
    for where, values in whole.items():
        rows.append(line_row(where, values))
        if under:
            rows += under.get(where, ())
    if several:
        rows += [SEVERAL_ROW, *several]
    rules = [COMMAND_RULE] if several or under else []
    return rows + tree, rules + ([TREE_RULE] if tree else [])


def _whole_rows(entries: Sequence[FoundArtifact], layouts: Layouts) -> list[str]:
    """`render_rows` when no entry is folded: each value on its line's row, the values of
    one group (the same value twice) together, in the order of the group's first entry."""
    of = layouts.of
    by_value: dict[str, list[str]] = {}  # each value's lines, in order
    for found in entries:
        laid = of(found)
        lines = by_value.get(laid.value)
        if lines is None:
            by_value[laid.value] = [laid.where]
        else:
            lines.append(laid.where)
    whole: dict[str, list[str]] = {}
    for value, lines in by_value.items():
        for line in lines:
            values = whole.get(line)
            if values is None:
                whole[line] = [value]
            else:
                values.append(value)
    line_row = layouts.line_row
    return [line_row(where, values) for where, values in whole.items()]


_NOT_A_WORD = re.compile(r"[\s|]")


def is_word(value: str) -> bool:
    """Whether a line's row writes `value` a blank apart from the others (one word, with no
    `|`), rather than after ` | `."""
    return bool(value) and _NOT_A_WORD.search(value) is None


def line_values(values: Sequence[str]) -> str:
    """A line's row after its `- line 4:`: the values that are one word, each after a blank
    (` a.py ORD-1`), then each of the others after ` | ` (` | pytest -q`); "" for none.
    Read back, the row splits at ` | `: the first part's words, then each part whole."""
    words: list[str] = []
    spaced: list[str] = []
    for value in values:
        (words if is_word(value) else spaced).append(value)
    return "".join(" " + word for word in words) + "".join(" | " + value for value in spaced)


def _items_by_line(members: Sequence[tuple[str, str, str]]) -> str:
    """A command group's items on several lines: those of each line together and followed
    by it (`-n 1p | -n 2p (line 4); -n 3p (line 9)`)."""
    by_line: dict[str, list[str]] = {}
    for item, where, _ in members:
        by_line.setdefault(where, []).append(item)
    return "; ".join(f"{' | '.join(items)} ({where})" for where, items in by_line.items())
