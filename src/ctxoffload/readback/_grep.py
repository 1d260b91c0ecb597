"""Grep: the lines of the files of the roots that match a regex, with context, capped.

The files to search are one file, the files under a folder, or those a glob names
(`_listing.py`); each is opened through `open_readable` and sniffed (binary files, FIFOs,
sockets and devices are skipped and counted). The lines of a text file, with their context,
are those the one search engine finds (`ctxoffload._search`, `ctxoffload grep`'s too, a byte
that is not UTF-8 matching as the U+FFFD shown for it); a context.jsonl line is judged by
its one rule (`_search.log`, through `_matches.py`), so it matches on the text the model saw.
The search keeps what it found in a `_Search` and stops at the deadline, after one match
more than `max_matches` (to say that more exist), or once what it kept would not fit the
output cap, so memory stays bounded whatever the arguments; `_answer` then writes the
result: `path:line:text` for a match, `path-line-text` for context, `--` between hunks.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from .._search.engine import SearchTimedOut, search_lines
from .._search.matcher import Matcher, compile_matcher
from .._search.sniff import SNIFF_BYTES, binary_reason
from ..exceptions import InvalidContent, ToolError
from ..text import is_jsonl
from ._arguments import as_int, quote
from ._confine import NotRegular, display_name, exists_in_roots, open_readable, resolve_in_roots
from ._globs import has_wildcard
from ._lines import NOTE_ROOM, line_text
from ._listing import files_under, glob_entries, outside_note
from ._matches import Row, as_rows, in_context

__all__ = ["grep_files"]

# At most this many context lines around a match: more could never fit the output cap, and
# keeping them would cost memory (context_lines=10**9 on a big log).
_MAX_CONTEXT_LINES = 100


def grep_files(
    pattern: str,
    path_or_glob: str,
    context_lines: int,
    max_matches: int,
    *,
    roots: list[Path],
    max_line_chars: int,
    max_output_chars: int,
    timeout: float | None,
) -> str:
    """Search a file, a folder tree or a glob for `pattern`; blocking.

    Args:
        pattern: a regular expression in RE2 syntax, matched against each line.
        path_or_glob: a file, a folder (searched recursively) or a glob.
        context_lines: lines shown before and after each match (at most 100).
        max_matches: the most matching lines shown.
        roots: the real roots.
        max_line_chars: longest line shown (cut around its match).
        max_output_chars: longest answer, notes included.
        timeout: seconds the listing and the search may take; None for no bound.

    Returns:
        The matching lines and notes.

    Raises:
        ToolError: a bad argument or pattern, a path outside the roots, one file that cannot
            be searched, or no file descriptors left.
    """
    context_lines = min(as_int("context_lines", context_lines, minimum=0), _MAX_CONTEXT_LINES)
    max_matches = as_int("max_matches", max_matches, minimum=1)
    try:
        matcher = compile_matcher(pattern)  # refused with advice on what to write instead
    except InvalidContent as exc:
        raise ToolError(str(exc)) from None
    deadline = None if timeout is None else time.monotonic() + timeout
    files, outside, single_file = _targets(path_or_glob, roots, deadline)
    notes = [outside_note(outside)] if outside else []
    if not files:
        return "\n".join([f"No files to search in {quote(path_or_glob)}.", *notes])
    search = _Search(matcher, context_lines, max_matches, max_line_chars, max_output_chars)
    search.run(files, roots, single_file, deadline)
    if single_file and search.binary:
        raise ToolError(
            f"{quote(path_or_glob)} is a binary file ({search.binary_reason}): Grep "
            f"searches text only; it is probably a data file to refer to by path"
        )
    return _answer(search, pattern, path_or_glob, timeout, notes)


def _targets(
    path_or_glob: str, roots: list[Path], deadline: float | None
) -> tuple[list[tuple[str, Path]], int, bool]:
    """The files to search as (shown, real path), the links skipped, and whether it is one."""
    if not isinstance(path_or_glob, str):
        raise ToolError(f"path_or_glob must be a string, got {quote(path_or_glob)}")
    path_or_glob = path_or_glob or "."
    if has_wildcard(path_or_glob) and not exists_in_roots(path_or_glob, roots):
        entries, outside = glob_entries(path_or_glob, roots, deadline)
        return [(shown, real) for shown, real, is_dir in entries if not is_dir], outside, False
    real = resolve_in_roots(path_or_glob, roots)
    if real.is_dir():
        files, outside = files_under(real, roots, deadline)
        return files, outside, False
    return [(display_name(real, roots), real)], 0, True


class _Search:
    """One Grep's search and what it found, counted as the answer needs it."""

    def __init__(
        self,
        matcher: Matcher,
        context: int,
        max_matches: int,
        max_line_chars: int,
        max_chars: int,
    ) -> None:
        self.matcher = matcher
        self.context = context
        self.max_matches = max_matches
        self.max_line_chars = max_line_chars
        self.max_chars = max_chars
        self.hits: list[tuple[str, Row]] = []  # (file as shown, line), in order
        self.searching: str | None = None  # the file searched last
        self.searched = self.binary = self.special = self.matches = 0
        self.binary_reason = ""  # why the last file skipped as binary is binary
        self.unreadable: list[str] = []
        self.more = False  # a match past max_matches was found
        self.timed_out = False
        self._kept = 0  # characters kept in hits; past the output cap, the search stops

    @property
    def full(self) -> bool:
        """Whether `max_matches` matches were found."""
        return self.matches == self.max_matches

    def run(
        self,
        files: list[tuple[str, Path]],
        roots: list[Path],
        single_file: bool,
        deadline: float | None,
    ) -> None:
        """Search each file through a verified descriptor, until done or stopped."""
        try:
            for shown, real in files:
                if deadline is not None and time.monotonic() > deadline:
                    raise SearchTimedOut
                try:
                    file = open_readable(shown, real, roots)
                except NotRegular:
                    if single_file:
                        raise
                    self.special += 1
                    continue
                except ToolError as exc:
                    if single_file or "no file descriptors" in str(exc):
                        raise
                    self.unreadable.append(f"{shown} ({exc})")
                    continue
                self.searching = shown
                self.searched += 1
                with file:
                    if not self._search_file(shown, file, deadline):
                        return
        except SearchTimedOut:
            self.timed_out = True

    def _search_file(self, shown: str, file: IO[bytes], deadline: float | None) -> bool:
        """Search one open file; False when the whole search stops here."""
        try:
            why = binary_reason(file.read(SNIFF_BYTES))
            if why is not None:
                self.binary += 1
                self.binary_reason = why
                return True
            file.seek(0)
            found = (
                in_context(
                    self.matcher,
                    _numbered(file, deadline),
                    context=self.context,
                    # Asked for context, a matching message is shown whole too, as the
                    # messages around it are: a call's id found, its arguments beside it.
                    whole_message=self.context > 0,
                    max_chars=self.max_line_chars,
                )
                if is_jsonl(shown)
                else self._text_rows(file, deadline)
            )
            for before, row in found:
                if row.is_match:
                    if self.full:
                        self.more = True
                        return False
                    for context_row in before:
                        self._keep(shown, context_row)
                    self.matches += 1
                self._keep(shown, row)
                if self._kept > self.max_chars:
                    return False  # _answer writes the note about the cap
        except OSError as exc:
            self.unreadable.append(f"{shown} ({exc.strerror or exc})")
        return True

    def _text_rows(
        self, file: IO[bytes], deadline: float | None
    ) -> Iterator[tuple[list[Row], Row]]:
        """The lines the engine finds in a text file, each shown as its decoded text (the
        engine dropped its trailing "\\r"), cut to `max_line_chars`."""
        found = search_lines(
            file,
            self.matcher,
            context=self.context,
            deadline=deadline,
        )
        return as_rows(
            self.matcher,
            found,
            context=self.context,
            text_of=_decoded,
            max_chars=self.max_line_chars,
        )

    def _keep(self, shown: str, row: Row) -> None:
        self.hits.append((shown, row))
        # At least what the line costs in the answer, so past the cap the answer is too.
        self._kept += len(row.text) + len(shown) + len(str(row.number)) + 3


def _decoded(number: int, raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _numbered(file: IO[bytes], deadline: float | None) -> Iterator[tuple[int, str]]:
    for number, raw in enumerate(file, 1):
        if deadline is not None and time.monotonic() > deadline:
            raise SearchTimedOut
        yield number, line_text(raw)


def _answer(
    search: _Search, pattern: str, path_or_glob: str, timeout: float | None, notes: list[str]
) -> str:
    """The answer for what `search` found, within its output cap."""
    header: list[str] = []
    if search.timed_out and not search.full:
        where = f" while searching {search.searching}" if search.searching is not None else ""
        header.append(
            f"Error: Grep stopped after its time limit of {timeout:g} s{where}: "
            f"there is too much to search. Pass a narrower path_or_glob (one file, or a "
            f"glob such as sessions/*/tool_result-*.txt)."
        )
    notes = _notes(search) + notes
    if not search.hits and not header:
        summary = (
            f"No matches for {quote(pattern)} in {quote(path_or_glob)} "
            f"({search.searched} file(s) searched)."
        )
        return "\n".join([summary, *notes])
    # Header and notes are always shown; the matching lines get what is left.
    budget = search.max_chars - NOTE_ROOM - sum(len(line) + 1 for line in header + notes)
    body: list[str] = []
    used = shown_matches = 0
    previous: tuple[str, int] | None = None
    for name, row in search.hits:
        mark = ":" if row.is_match else "-"
        line = f"{name}{mark}{row.number}{mark}{row.text}"
        # grep and ripgrep print `--` between hunks only when context is asked for.
        separated = search.context > 0 and previous not in (None, (name, row.number - 1))
        cost = len(line) + 1 + (3 if separated else 0)
        if used + cost > budget:
            notes.insert(
                0,
                f"[output cap of {search.max_chars:,} characters reached after "
                f"{shown_matches} matches; narrow the pattern or path_or_glob, or lower "
                f"context_lines]",
            )
            break
        if separated:
            body.append("--")
        body.append(line)
        used += cost
        previous = (name, row.number)
        shown_matches += row.is_match
    if header and body:
        header.append("Matches found before the stop:")
    return "\n".join(header + body + notes)


def _notes(search: _Search) -> list[str]:
    notes: list[str] = []
    if search.more:
        notes.append(
            f"[showing the first {search.max_matches} matches; more exist: narrow the pattern "
            f"or path_or_glob, or raise max_matches]"
        )
    elif search.full and search.timed_out:
        notes.append(
            f"[showing the first {search.max_matches} matches; the search stopped before "
            f"finding out whether more exist: narrow the pattern or path_or_glob]"
        )
    if search.binary:
        notes.append(f"[{search.binary} binary file(s) skipped]")
    if search.special:
        notes.append(f"[{search.special} pipe(s), socket(s) or device(s) skipped]")
    if search.unreadable:
        notes.append(f"[could not read: {', '.join(search.unreadable[:5])}]"[:NOTE_ROOM])
    return notes
