"""Listing: which paths of the roots a folder or a glob names, links out of the roots skipped;
and Glob's answer, those paths one a line.

The walks follow no link into a folder; an entry that is a link is resolved and kept only
when its target lies inside the roots (the others are counted, so the answer can say how
many were skipped). A folder that cannot be listed, or running out of file descriptors, is
an error rather than an empty listing, and a walk stops at its deadline.

A walk lists what an agent stored and leaves the workspace's records out (events.jsonl,
state.json, lease.json, commit records, files being written: `layout.is_record`, the rule
of every search), so a Grep over a folder never finds the record of an earlier Grep. A
record is listed where it is asked for: a path that names it, or a glob whose last part
names it without a wildcard (`sessions/*/events.jsonl`).
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterator
from pathlib import Path

from .._disk.layout import is_record
from ..exceptions import ToolError
from ._arguments import quote
from ._confine import display_name, os_error_message, resolve_in_roots
from ._globs import compile_glob, has_wildcard
from ._lines import NOTE_ROOM

__all__ = ["Entry", "files_under", "glob_answer", "glob_entries", "outside_note", "walk"]

Entry = tuple[str, Path, bool]
"""A path found: (as shown, real path, is a folder)."""


def walk(start: Path, deadline: float | None) -> Iterator[tuple[str, list[str], list[str]]]:
    """`os.walk` of `start` without following links, sorted.

    Raises:
        ToolError: `start` cannot be listed, the process runs out of file descriptors, or
            the deadline passes.
    """
    top = os.fspath(start)

    def on_error(error: OSError) -> None:
        if error.filename in (top, None) or error.errno in (errno.EMFILE, errno.ENFILE):
            name = error.filename if error.filename is not None else "a directory"
            raise ToolError(os_error_message(f"cannot list {quote(str(name))}", error))

    for directory, dirnames, filenames in os.walk(top, followlinks=False, onerror=on_error):
        if deadline is not None and time.monotonic() > deadline:
            raise ToolError(
                f"listing {quote(top)} took longer than the time limit: pass a narrower path"
            )
        dirnames.sort()
        filenames.sort()
        yield directory, dirnames, filenames


def files_under(
    start: Path, roots: list[Path], deadline: float | None
) -> tuple[list[tuple[str, Path]], int]:
    """The regular files under `start` as (shown, real path), sorted, and the links skipped.

    Folders reached through a link are not descended; FIFOs and sockets, which would block a
    read, are left out, and so are the records (`_leave_records_out`).
    """
    files: list[tuple[str, Path]] = []
    outside = 0
    for directory, dirnames, filenames in walk(start, deadline):
        filenames = _leave_records_out(directory, dirnames, filenames)
        for name in filenames:
            entry = Path(directory, name)
            real = _real_entry(entry, roots)
            if real is None:
                outside += 1
            elif real.is_file() and not (real is not entry and is_record(real.parts)):
                files.append((display_name(entry, roots), real))
    return files, outside


def glob_entries(
    pattern: str, roots: list[Path], deadline: float | None = None
) -> tuple[list[Entry], int]:
    """The paths matching a glob, sorted by how they are shown, and the links skipped.

    Raises:
        ToolError: the pattern holds a NUL, a `..` after a wildcard, or is not a valid glob;
            its fixed prefix lies outside the roots; or listing fails.
    """
    if "\0" in pattern:
        raise ToolError(f"pattern {quote(pattern)} contains a NUL byte")
    parts = pattern.split("/")
    first_wild = next((i for i, part in enumerate(parts) if has_wildcard(part)), None)
    if first_wild is None:
        real = resolve_in_roots(pattern, roots)
        if not os.path.lexists(real):
            return [], 0
        return [(display_name(real, roots), real, real.is_dir())], 0
    prefix = "/".join(parts[:first_wild]) or ("/" if pattern.startswith("/") else ".")
    rest = [part for part in parts[first_wild:] if part not in ("", ".")]
    if ".." in rest:
        raise ToolError(
            f"'..' may appear only before the first wildcard in {quote(pattern)}: "
            f"write the directory out, then the wildcard"
        )
    # The pattern is checked before anything is listed: a bad glob is the same error
    # whether or not its folder exists yet.
    try:
        matcher = compile_glob(rest)
    except ValueError as reason:
        raise ToolError(
            f"invalid glob {quote(pattern)} ({reason}): use * ? ** and classes such as "
            f"[a-z] with the lower bound first; put a literal [ inside brackets: [[]"
        ) from None
    base = resolve_in_roots(prefix, roots)
    if not base.is_dir():
        return [], 0
    recursive = "**" in rest
    # A glob that spells the last name out asks for it, record or not.
    names_its_files = not has_wildcard(rest[-1])
    entries: list[Entry] = []
    outside = 0
    for directory, dirnames, filenames in walk(base, deadline):
        if not names_its_files:
            filenames = _leave_records_out(directory, dirnames, filenames)
        relative_dir = Path(directory).relative_to(base)
        for name in dirnames + filenames:
            if not matcher.fullmatch((relative_dir / name).as_posix()):
                continue
            entry = Path(directory, name)
            target = _real_entry(entry, roots)
            if target is None:
                outside += 1
            elif names_its_files or target is entry or not is_record(target.parts):
                entries.append((display_name(entry, roots), target, target.is_dir()))
        if not recursive and len(relative_dir.parts) + 1 >= len(rest):
            dirnames.clear()  # deeper paths cannot match a pattern without `**`
    entries.sort(key=lambda entry: entry[0])
    return entries, outside


def _leave_records_out(directory: str, dirnames: list[str], filenames: list[str]) -> list[str]:
    """The files of `filenames` that are content, not records (`layout.is_record`); the
    folders of `dirnames` that are records (being removed) are taken out of it, in place, so
    the walk does not enter them. (A link is judged again by its target, inside the roots:
    a link to events.jsonl is a record too.)"""
    parts = Path(directory).parts
    dirnames[:] = [name for name in dirnames if not is_record((*parts, name))]
    return [name for name in filenames if not is_record((*parts, name))]


def _real_entry(entry: Path, roots: list[Path]) -> Path | None:
    """`entry`, or a link's target when it lies inside the roots; None when it does not."""
    if not entry.is_symlink():
        return entry
    try:
        return resolve_in_roots(entry, roots)
    except ToolError:
        return None


def outside_note(outside: int) -> str:
    """The note saying how many links out of the roots were skipped."""
    return f"[{outside} symlink(s) pointing outside the allowed roots skipped]"


def glob_answer(pattern: str, roots: list[Path], *, max_paths: int, max_chars: int) -> str:
    """What Glob answers: the matching paths, one a line, folders ending with `/`, capped.

    Raises:
        ToolError: the pattern is empty or invalid, lies outside the roots, or listing fails.
    """
    if not isinstance(pattern, str) or not pattern:
        raise ToolError("pattern is empty: pass a glob such as '**/*.txt'")
    entries, outside = glob_entries(pattern, roots)
    notes = [outside_note(outside)] if outside else []
    if not entries:
        return "\n".join([f"No paths match {quote(pattern)}.", *notes])
    budget = max_chars - 2 * NOTE_ROOM
    lines: list[str] = []
    used = 0
    for display, _, is_dir in entries[:max_paths]:
        line = display + ("/" if is_dir and display != "." else "")
        if used + len(line) + 1 > budget:
            break
        lines.append(line)
        used += len(line) + 1
    if len(lines) < len(entries):
        lines.append(f"[showing {len(lines)} of {len(entries):,} paths; narrow the pattern]")
    return "\n".join(lines + notes)
