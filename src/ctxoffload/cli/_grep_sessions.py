"""What `ctxoffload grep` searches in a workspace: each session's tool-result files, then its
context.jsonl (and events.jsonl with --events), each file opened as every command opens one
(`_access.open_in`: no link followed, no hard-linked file read), sniffed as the agent's Grep
sniffs it (`_search.sniff.binary_reason`: a binary file is not searched, and said on stderr)
and searched by the engine (`ctxoffload._search.engine`), or by ripgrep where it finds the
same lines (`_grep_ripgrep.py`): a tool-result file as the agent's Read reads it, a log line
by the rule of the agent's Grep. With --writers, each line found is given the agent that
wrote it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

from .._disk.commit import iter_lines
from .._disk.layout import CONTEXT_FILE, EVENTS_FILE, SESSIONS_DIR, is_tool_result_name
from .._disk.read import Folder
from .._search.engine import search_lines
from .._search.log import search_log
from .._search.matcher import Matcher
from .._search.sniff import SNIFF_BYTES, binary_reason
from ..exceptions import CliError
from ._access import committed_end, open_in, refusal
from ._arguments import child_path
from ._grep_output import GrepQuery, Hit, Printer
from ._grep_ripgrep import ripgrep_for
from ._output import shown as shown_path

__all__ = ["search_session"]


def search_session(
    workdir: str,
    session: str,
    query: GrepQuery,
    matcher: Matcher,
    printer: Printer,
    skip: Callable[[str], None],
) -> None:
    """Search one session: its tool results, then context.jsonl (and events.jsonl with
    --events). A file that is not read, or a folder that cannot be listed, is said through
    `skip`; a session removed since it was listed (gc), or a link in its place, is passed
    over."""
    where = child_path(child_path(workdir, SESSIONS_DIR), session)
    emit: Callable[[Hit], None] = printer.emit
    with contextlib.ExitStack() as stack:
        try:
            folder = stack.enter_context(Folder(workdir, SESSIONS_DIR, session))
            names = [name for name in folder.names() if is_tool_result_name(name)]
        except OSError as exc:  # Refused and OffloadError too
            line = refusal(exc, where)
            if line is not None:
                skip(line)
            return
        names.append(CONTEXT_FILE)
        if query.events:
            names.append(EVENTS_FILE)
        if query.writers:
            emit = _with_writers(folder, emit)
        fast = ripgrep_for(query, matcher, printer)

        def search_file(name: str, shown: str) -> None:
            """Report the lines of one file that match, with `query.context` lines around
            each: a context.jsonl's messages by `search_log` (read up to its committed
            length, each under its JSONL line number), any other file's lines by ripgrep
            where it can, else by `search_lines`. A missing file, a link or a special file is
            passed over (`_access.refusal`); a binary file is said on stderr (`Printer.note`:
            the agent's Grep counts it in a note) and not searched.

            Raises:
                CliError: the file has more than one hard link, or cannot be read; nothing
                    of it was searched.
            """
            opened = open_in(folder, name, shown)
            if opened is None:
                return
            fd, st = opened
            with os.fdopen(fd, "rb", buffering=0) as f:
                why = binary_reason(os.pread(fd, SNIFF_BYTES, 0))
                if why is not None:
                    printer.note(f"{shown}: binary file ({why}), not searched")
                    return
                if name == CONTEXT_FILE:
                    end = committed_end(folder, name, fd, st.st_size)  # a batch never committed
                    found = search_log(iter_lines(fd, 0, end), matcher, context=query.context)
                elif fast is not None and fast.search(fd, shown, session):
                    return
                else:
                    found = search_lines(f, matcher, context=query.context)
                for number, text, is_match in found:
                    emit(Hit(shown, number, text, is_match, session))

        for name in names:
            shown = shown_path(child_path(where, name))
            try:
                search_file(name, shown)
            except CliError as exc:  # a hard-linked or unreadable file: not read
                skip(str(exc))


def _with_writers(folder: Folder, emit: Callable[[Hit], None]) -> Callable[[Hit], None]:
    """`emit`, each hit first given its writer: a context.jsonl line's is the writer of the
    `context` event whose span holds it; a tool result file's, of the `tool_result` event
    naming it; an events.jsonl line's, its own."""
    from .._disk.events import EventKind, is_event
    from .._disk.writer import WRITER_FIELD, line_writers

    try:
        events = [e for e in folder.read_log(EVENTS_FILE) if is_event(e)]
    except (OSError, ValueError):
        events = []
    by_line = line_writers(events)
    by_file: dict[str, dict[str, Any]] = {}
    for event in events:
        writer, reference = event.get(WRITER_FIELD), event.get("reference")
        kind = event.get("kind")
        if (
            kind == EventKind.TOOL_RESULT
            and isinstance(writer, dict)
            and isinstance(reference, str)
        ):
            by_file.setdefault(os.path.basename(reference), writer)
    unknown: dict[str, Any] = {"agent": None, "session": None, "pid": None}

    def emit_with_writer(hit: Hit) -> None:
        name = os.path.basename(hit.path)
        if name == CONTEXT_FILE:
            hit.writer = by_line.get(hit.line, unknown)
        elif name == EVENTS_FILE:
            event = events[hit.line - 1] if 0 < hit.line <= len(events) else {}
            found = event.get(WRITER_FIELD)
            hit.writer = found if isinstance(found, dict) else unknown
        else:
            hit.writer = by_file.get(name, unknown)
        emit(hit)

    return emit_with_writer
