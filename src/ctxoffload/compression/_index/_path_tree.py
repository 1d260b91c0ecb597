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

__all__ = ["TREE_RULE", "in_tree", "placed", "tree_rows"]

TREE_RULE = (
    "A folder's row lists its files: `- src/ (line 4): a.py b/c.py` means src/a.py, src/b/c.py "
    "and their folders (no leading ./); an indented row adds to the path of the row it is "
    "under."
)
"""What the header says of the tree's rows, once the index holds one."""

_LINE = re.compile(r"line (\d+)")
_MARK_LINES = 3  # the most lines a mark lists one by one; more are written as a range


# What a path written in the tree may not hold: a blank (a row's items are parted by a
# space), a `(` (a mark), an empty part but the first (`//`), a part ending with `:` (a row's
# head is its directories and a colon), an end that is no name (`/`, `/.`, `/..`).
_NOT_IN_TREE = re.compile(r"[\s(]|//|:/|:\Z|/\.{0,2}\Z")


def in_tree(value: str) -> bool:
    """Whether a path can be written in the tree: one word (no blank: the items of a row are
    parted by a space), a directory and a name, no empty or `.`/`..` name at its end, and no
    part a row's head or mark could be mistaken for (`(`, `:` ending a part)."""
    return "/" in value and value.isprintable() and _NOT_IN_TREE.search(value) is None


class _Node:
    """A directory: the files named in it, and the directories under it."""

    __slots__ = (
        "costs",
        "filed",
        "files",
        "has_row",
        "itself",
        "length",
        "names",
        "part",
        "under",
    )

    def __init__(self, part: str, length: int = 0) -> None:
        self.part = part
        self.length = length  # the length of its path from the root, `/` ended
        self.files: list[tuple[str, str, str]] = []  # name, where, value
        self.under: dict[str, _Node] = {}
        self.itself: list[tuple[str, str]] = []  # the directory named: where, value
        self.names = 0  # the length of its files' names, together
        self.filed = False  # whether a file is named under it (`_Tree.__init__`)
        # For each row it may be under (none, then each directory above it, the nearest
        # last): the fewest characters it and what is under it take, and whether it gets a
        # row then (`_Tree._cost`).
        self.costs: list[int] = []
        self.has_row: list[bool] = []


def _mark(wheres: Sequence[str]) -> str:
    """The lines a row's items are on: ` (line 4)`, ` (lines 4, 9)`, ` (lines 4-40)`."""
    lines = sorted({int(w[5:]) for w in set(wheres) if _LINE.fullmatch(w)})
    if not lines:
        return " (no line)"
    if len(lines) == 1:
        return f" (line {lines[0]})"
    if len(lines) <= _MARK_LINES:
        return " (lines " + ", ".join(map(str, lines)) + ")"
    return f" (lines {lines[0]}-{lines[-1]})"


class _Tree:
    """The directories of the paths given, and which of them get a row.

    Which directories get a row is a choice over pairs (a directory, the nearest row above
    it), each worked out once (`cost`): a path's length from a row is the difference of
    their lengths from the root, never a path rebuilt."""

    def __init__(
        self, paths: Sequence[tuple[str, str]], parts: Sequence[Sequence[str]] | None = None
    ) -> None:
        # (No node refers to the one above it: a tree without cycles is freed as soon as it is
        # rendered, and costs the garbage collector no pass over everything alive.)
        self.root = _Node("")
        if parts is None:
            parts = [placed(value).split("/") for value, _ in paths]
        for (value, where), (*directories, name) in zip(paths, parts, strict=True):
            node = self.root
            for part in directories:
                child = node.under.get(part)
                if child is None:
                    child = node.under[part] = _Node(part, node.length + len(part) + 1)
                node = child
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
            node.names = sum(len(name) for name, _, _ in kept)
        # A directory with nothing of its own and one directory under it that has nothing of
        # its own either is written with that one as one part (`a/b/`): of a row at either,
        # the lower is as cheap or cheaper; so which rows pay is worked out at the branchings
        # of the paths and where files are, not at every directory of a deep path.
        # Each directory is walked with the lengths of the rows it may be under (0 for none,
        # then each directory above it).
        walking = [(child, [0]) for child in self.root.under.values()]
        walked: list[tuple[_Node, list[int]]] = []
        while walking:
            node, tops = walking.pop()
            while not node.files and not node.itself and len(node.under) == 1:
                (child,) = node.under.values()
                if child.files or child.itself:
                    break
                node.part += "/" + child.part
                node.length, node.under = child.length, child.under
                node.files, node.itself, node.names = child.files, child.itself, child.names
            walked.append((node, tops))
            walking += [(child, [*tops, node.length]) for child in node.under.values()]
        # Whether a file is named under each directory (a path through it names it, so the
        # directory named itself costs nothing), and what it costs, from the deepest up.
        for node, tops in reversed(walked):
            node.filed = bool(node.files) or any(child.filed for child in node.under.values())
            self._cost(node, tops)

    @staticmethod
    def _cost(node: _Node, tops: list[int]) -> None:
        """Work out `node.costs` and `node.has_row` (its directories' are worked out): for
        each row it may be under (`tops`, the lengths of their paths: 0 for none, then each
        directory above it), the fewest characters it and what is under it take then."""
        children = list(node.under.values())
        files = len(node.files)
        # Under the row of `top`: its files are items of that row (or whole, 3 for ` | `,
        # under none), the directories under it decide for themselves.
        under_each = [sum(costs) for costs in zip(*(c.costs for c in children), strict=True)]
        if not under_each:
            under_each = [0] * (len(tops) + 1)
        itself = 0 if node.filed else len(node.itself)
        # A row of its own: its head, its mark (about 10 characters when it has files), its
        # files by name, what is under it from there.
        own = 8 + (10 if node.files or node.itself else 0) + node.names + files + under_each[-1]
        node.costs, node.has_row = [], []
        for at, top in enumerate(tops):
            inherit = node.length - top  # its path from there
            whole = 1 if at else 3
            without = files * (inherit + whole) + node.names + under_each[at]
            without += itself * (inherit + (0 if at else 2))
            row = own + inherit < without
            node.costs.append(own + inherit if row else without)
            node.has_row.append(row)

    def rows(self) -> tuple[list[str], list[tuple[str, str]]]:
        """The rows, and the paths written whole (`(value, where)`)."""
        whole: list[tuple[str, str]] = []

        def place(
            node: _Node,
            top: _Node | None,
            row: list[tuple[str, str]] | None,
            inherit: str,
            at: int,
        ) -> None:
            """Place `node`, whose path from `top` (the nearest row above, None for none;
            the `at`-th of those it may be under) is `inherit`, in `row` (`top`'s items) or
            a row of its own."""
            if not node.has_row[at]:
                for name, where, value in node.files:
                    if row is None:
                        whole.append((value, where))
                    else:
                        row.append((inherit + name, where))
                for where, value in [] if node.filed else node.itself:
                    if row is None:
                        whole.append((value, where))
                    else:
                        row.append((inherit[:-1], where))
                for child in node.under.values():
                    place(child, top, row, inherit + child.part + "/", at)
                return
            at = len(heads)
            heads.append((depth_of[id(top)], inherit, id(top)))
            below.setdefault(id(top), []).append(id(node))
            depth_of[id(node)] = depth_of[id(top)] + 1
            items = [(name, where) for name, where, _ in node.files]
            for child in node.under.values():
                place(child, node, items, child.part + "/", len(node.has_row))
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
            place(child, None, None, child.part + "/", 0)
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


def tree_rows(
    paths: Sequence[tuple[str, str]], parts: Sequence[Sequence[str]] | None = None
) -> tuple[list[str], list[tuple[str, str]]]:
    """The rows of the tree of `paths` (`(value, where)`, each `in_tree`), and the paths no
    row pays for, to be written whole on their line's row (`parts`: each path's `placed`
    split at its `/`, when the caller has them).

    An item's lines are those of its row's mark: a row holds the items under it that no row
    of their own holds, and names the lines of its own files (a file of a directory without a
    row is read at the lines of the row it is written in, which its mark includes).

    The paths under each first folder (`parts[i][0]`) make rows of their own: the rows and
    the paths written whole are those of each first folder's paths taken alone, one folder
    after the other in the order of its first path (`_layout.Layouts.tree` works out each
    once).
    """
    if not paths:
        return [], []
    return _Tree(paths, parts).rows()
