"""The paths of the artifact index folded into a tree of their directories.

A listing that leaves the context (`ls -R`, `rg --files`, a test run's paths) names hundreds
of files under a few directories. Written whole, each repeats its directories
(`./doc/data/messages/a/abstract-method/bad.py`, 13 tokens); in the tree each directory is
written once, as the head of a row, and the files under it as their path from there:

    - doc/data/messages/ (line 3): b/bare-except/bad.py
      - a/: abstract-method/bad.py abstract-method/good.py arguments-differ/bad.py
    - /testbed/pylint/ (lines 11, 26): checkers/utils.py lint/pylinter.py

- `- dir/ (line 3): x y/z`: dir/x and dir/y/z, and the folders on their way (dir, dir/y), on
  line 3 of the context file (`lines 9, 12`: on one of those lines; `lines 9-40`: on one of
  the lines from 9 to 40);
- a row indented under it goes on from its path: `  - a/: b.py` under `- dir/` is dir/a/b.py,
  on the line its own mark names, or its parent's when it has none (a row on its parent's
  lines leaves them to it; a row with no item of its own takes the lines its rows share);
- a path is placed without a leading `./` (`./doc/a.md` and `doc/a.md` are one file, written
  once); a directory named itself costs nothing when a path the index writes goes through it.

Every item keeps the end of its path whole (a search of the context for `bad.py` or for
`abstract-method/bad.py` lands on its row), and the path whole is the heads above it and the
item read together: the agent's Grep over the context file finds it there.

Which directories get a row is chosen to write the fewest characters (a row pays for its head
and mark when the items under it are shorter by more than that); a path that no row pays for
is written whole, on its line's row.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["TREE_RULE", "in_tree", "placed", "tree_rows"]

TREE_RULE = (
    "`- src/ (line 4): a.py b/c.py` names src/a.py, src/b/c.py and their folders (a leading "
    "./ left off); an indented row goes on from the row it is under."
)
"""What the header says of the tree's rows, once the index holds one."""

_LINE = re.compile(r"line (\d+)")
_MARK_LINES = 3  # the most lines a mark lists one by one; more are written as a range


def in_tree(value: str) -> bool:
    """Whether a path can be written in the tree: one word (no blank: the items of a row are
    parted by a space), a directory and a name, no empty or `.`/`..` name at its end, and no
    part a row's head or mark could be mistaken for (`(`, `:` ending a part)."""
    if any(c.isspace() for c in value) or "(" in value or not value.isprintable():
        return False
    parts = value.split("/")
    if len(parts) < 2 or parts[-1] in ("", ".", ".."):
        return False
    # Only an absolute path starts with an empty part; none may end with `:` (a row's head
    # is its directories and a colon).
    return all(parts[1:-1]) and not any(p.endswith(":") for p in parts)


@dataclass(slots=True, eq=False)
class _Node:
    """A directory: the files named in it, and the directories under it."""

    part: str
    parent: _Node | None
    files: list[tuple[str, str, str]] = field(default_factory=list)  # name, where, value
    under: dict[str, _Node] = field(default_factory=dict)
    itself: list[tuple[str, str]] = field(default_factory=list)  # the directory named: where, value

    def path_from(self, top: _Node | None) -> str:
        """Its path from the directory `top` (not included) down, `/` ended; from the root
        when `top` is None."""
        parts: list[str] = []
        node: _Node | None = self
        while node is not None and node is not top and node.parent is not None:
            parts.append(node.part)
            node = node.parent
        return "/".join(reversed(parts)) + "/"


def _mark(wheres: Sequence[str]) -> str:
    """The lines a row's items are on: ` (line 4)`, ` (lines 4, 9)`, ` (lines 4-40)`."""
    lines = sorted({int(m.group(1)) for w in wheres if (m := _LINE.fullmatch(w))})
    if not lines:
        return " (no line)"
    if len(lines) == 1:
        return f" (line {lines[0]})"
    if len(lines) <= _MARK_LINES:
        return " (lines " + ", ".join(map(str, lines)) + ")"
    return f" (lines {lines[0]}-{lines[-1]})"


class _Tree:
    """The directories of the paths given, and which of them get a row."""

    def __init__(self, paths: Sequence[tuple[str, str]]) -> None:
        self.root = _Node("", None)
        for value, where in paths:
            *directories, name = placed(value).split("/")
            node = self.root
            for part in directories:
                node = node.under.get(part) or node.under.setdefault(part, _Node(part, node))
            node.files.append((name, where, value))
        # A directory named itself (`./doc` beside `./doc/a.md`) is named by its row's head
        # when it gets a row, and is an item of the row above (or whole) otherwise.
        stack = [self.root]
        while stack:
            node = stack.pop()
            stack += node.under.values()
            kept = []
            for name, where, value in node.files:
                child = node.under.get(name)
                if child is not None:
                    child.itself.append((where, value))
                else:
                    kept.append((name, where, value))
            node.files = kept
        self._costs: dict[tuple[int, int], tuple[int, bool]] = {}
        self._filed: dict[int, bool] = {}

    def holds_files(self, node: _Node) -> bool:
        """Whether a file is named under `node`: its path, however it is written, goes
        through `node`, which it names then (the directory named itself costs nothing)."""
        known = self._filed.get(id(node))
        if known is None:
            known = bool(node.files) or any(map(self.holds_files, node.under.values()))
            self._filed[id(node)] = known
        return known

    def cost(self, node: _Node, top: _Node | None) -> tuple[int, bool]:
        """The fewest characters `node` and what is under it take when the nearest row above
        is `top`'s (None: no row, files written whole), and whether `node` gets a row then."""
        key = (id(node), id(top))
        known = self._costs.get(key)
        if known is not None:
            return known
        # No row: its files are items of `top`'s row (or whole, 3 for ` | `), the
        # directories under it decide for themselves.
        inherit = node.path_from(top)
        without = sum(len(inherit) + len(name) + (1 if top else 3) for name, _, _ in node.files)
        if not self.holds_files(node):
            without += len(node.itself) * (len(inherit) + (0 if top else 2))
        without += sum(self.cost(child, top)[0] for child in node.under.values())
        # A row: its head, its mark (about 10 characters when it has files), its files by name.
        own = len(inherit) + 8 + (10 if node.files or node.itself else 0)
        own += sum(len(name) + 1 for name, _, _ in node.files)
        own += sum(self.cost(child, node)[0] for child in node.under.values())
        found = (own, True) if own < without else (without, False)
        self._costs[key] = found
        return found

    def rows(self) -> tuple[list[str], list[tuple[str, str]]]:
        """The rows, and the paths written whole (`(value, where)`)."""
        whole: list[tuple[str, str]] = []

        def place(node: _Node, top: _Node | None, row: list[tuple[str, str]] | None) -> None:
            _, has_row = self.cost(node, top)
            inherit = node.path_from(top)
            if not has_row:
                for name, where, value in node.files:
                    if row is None:
                        whole.append((value, where))
                    else:
                        row.append((inherit + name, where))
                for where, value in [] if self.holds_files(node) else node.itself:
                    if row is None:
                        whole.append((value, where))
                    else:
                        row.append((inherit[:-1], where))
                for child in node.under.values():
                    place(child, top, row)
                return
            at = len(heads)
            heads.append((depth_of[id(top)], inherit, id(top)))
            below.setdefault(id(top), []).append(id(node))
            depth_of[id(node)] = depth_of[id(top)] + 1
            items = [(name, where) for name, where, _ in node.files]
            for child in node.under.values():
                place(child, node, items)
            wheres = [where for _, where in items] + [where for where, _ in node.itself]
            # A row with no item of its own takes the lines of the rows under it when they
            # are all on the same ones (which then leave them to it).
            under = {marks[child] for child in below.get(id(node), [])}
            marks[id(node)] = _mark(wheres) if wheres else (under.pop() if len(under) == 1 else "")
            # `./a/b.py` and `a/b.py` are one item (its lines are both in the mark).
            written = dict.fromkeys(item for item, _ in items)
            bodies[at] = (id(node), "".join(" " + item for item in written))

        depth_of = {id(None): 0}
        heads: list[tuple[int, str, int]] = []  # each row's depth, head, parent (in order)
        bodies: dict[int, tuple[int, str]] = {}  # each row's node and items
        marks: dict[int, str] = {id(None): ""}
        below: dict[int, list[int]] = {}  # the rows directly under each row
        for child in self.root.under.values():
            place(child, None, None)
        rows: list[str] = []
        for at, (depth, inherit, parent) in enumerate(heads):
            node, items = bodies[at]
            # A row on the lines of the row it is under leaves them to that row's mark.
            mark = "" if depth and marks[node] == marks[parent] else marks[node]
            rows.append("  " * depth + "- " + inherit + mark + ":" + items)
        return rows, whole


def placed(value: str) -> str:
    """Where `value` goes in the tree: its path without a leading `./` (`./src/a.py` and
    `src/a.py` are one file), unless that leaves no directory."""
    rest = value[2:] if value.startswith("./") else value
    return rest if "/" in rest else value


def tree_rows(paths: Sequence[tuple[str, str]]) -> tuple[list[str], list[tuple[str, str]]]:
    """The rows of the tree of `paths` (`(value, where)`, each `in_tree`), and the paths no
    row pays for, to be written whole on their line's row.

    An item's lines are those of its row's mark: a row holds the items under it that no row
    of their own holds, and names the lines of its own files (a file of a directory without a
    row is read at the lines of the row it is written in, which its mark includes).
    """
    return _Tree(paths).rows()
