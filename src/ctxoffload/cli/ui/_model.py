"""What `ctxoffload ui` serves, as plain data: the sessions, a session's timeline and steps,
what the model was sent at one step, the difference between two steps, a stored file read as
the agent's Read tool reads it, and a search as `ctxoffload grep` searches.

Everything is read from the workspace files through the session-view layer the commands
present too (`cli/_view/`: the rows of `ls`, the events and steps of `show`), `describe` for
the sentences, and `FileToolbox.read` for a file, and every string meant for display goes through
`inert`, so nothing a session holds acts on the page or a terminal: the page then shows it as
text (`textContent`), never as HTML.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterable
from typing import Any

from ..._disk.events import EventKind
from ..._disk.ids import SESSION_ID_PATTERN
from ..._disk.layout import DATA_DIR, DATA_NAME, SESSIONS_DIR
from ..._disk.read import sessions_folder
from ..._search.matcher import compile_matcher
from ...exceptions import CliError, InvalidContent, InvalidReference
from ...text import message_lines
from .._access import session_folder
from .._describe import (
    NOT_BY_AGENT,
    Timeline,
    by_agent,
    describe,
    names_stored_files,
    session_roots,
)
from .._output import inert
from .._view import SessionLog, Warnings, session_rows, shown_fields, step_messages

__all__ = ["BODY_CHARS", "MARKED_KINDS", "UiModel"]

BODY_CHARS = 100_000
"""Characters of one message body a step view shows before it says how many it left out
(the whole is one click away: `full`)."""

MARKED_KINDS = {
    EventKind.COMPRESSION: "compression",
    EventKind.COMPACT: "compression",
    EventKind.OFFLOAD: "offload",
    EventKind.TRUNCATION: "offload",
    EventKind.CLEAR_TOOL_USES: "clearing",
    EventKind.CLEAR_THINKING: "clearing",
    EventKind.IMAGE_LIMIT: "clearing",
    EventKind.WINDOW: "window",
    EventKind.PIN: "pin",
    EventKind.UNPIN: "pin",
    EventKind.FORK: "fork",
    EventKind.SUBAGENT: "subagent",
    EventKind.OVER_WINDOW: "over_window",
}
"""The events marked on the timeline between two steps, and the mark each gets."""

_GREP_SECONDS = 60.0


class UiModel:
    """Reads one workspace folder for the page.

    Args:
        workdir: the workspace folder (for a bucket, the local copy of it).
        shown_as: how paths inside `workdir` are shown (the bucket's URL for a copy).
    """

    def __init__(self, workdir: str, shown_as: str | None = None) -> None:
        self.workdir = os.path.abspath(workdir)
        self.shown_as = shown_as or self.workdir
        prefixes = {re.escape(self.workdir + "/"), re.escape(self.shown_as.rstrip("/") + "/")}
        self._reference = re.compile(
            "(?:" + "|".join(sorted(prefixes, key=len, reverse=True)) + r")?"
            rf"((?:{SESSIONS_DIR}/{SESSION_ID_PATTERN}/[A-Za-z0-9._-]{{1,255}}[A-Za-z0-9])"
            rf"|(?:{DATA_DIR}/{DATA_NAME.pattern}))(?![A-Za-z0-9])"
        )

    # -- the sessions ---------------------------------------------------------------------

    def sessions(self) -> dict[str, Any]:
        """Every session with the facts `ls` shows, children under their parent (`depth`).

        Raises:
            CliError: sessions/ cannot be listed (removed while the page is open).
        """
        try:
            rows = session_rows(self.workdir, Warnings("ls"), newest_first=False)
        except OSError:
            try:
                sessions_folder(self.workdir)
            except InvalidReference as exc:  # it says which: no folder, not a workspace
                raise CliError(str(exc)) from None
            raise
        return {
            "workspace": self.shown_as,
            "sessions": _plain([shown_fields(row) for row in rows]),
        }

    # -- one session ----------------------------------------------------------------------

    def session(self, session: str) -> dict[str, Any]:
        """The timeline of `session`: a line for each event (as `show` prints it) and, for
        each model call, what filled the window and the events since the step before."""
        folder = self._folder(session)
        lines: list[dict[str, Any]] = []
        steps: dict[int, dict[str, Any]] = {}
        marks: list[dict[str, Any]] = []
        start: dict[str, Any] = {}
        with SessionLog(self.workdir, folder) as events:
            agent = any(by_agent(event) for event in events)
            names_files = any(names_stored_files(event) for event in events)
            # Each line as `show` prints it (a file of the workspace relative to it), each
            # summary once under its compression.
            root = tuple(
                dict.fromkeys([os.path.realpath(self.workdir), self.workdir, str(self.shown_as)])
            )
            timeline = Timeline(
                by_agent=agent, names_files=names_files, root=session_roots(root, folder)
            )
            indexes: dict[int, int] = {}  # the index of each event held (by its id)

            def entries(parts: Iterable[tuple[dict[str, Any] | None, list[str]]]) -> None:
                for part, text in parts:
                    if part is None:
                        continue  # NOT_BY_AGENT: said as `not_recorded`
                    step = part.get("step") if isinstance(part.get("step"), int) else None
                    lines.append(
                        {
                            "index": indexes.pop(id(part)),
                            "kind": part["kind"],
                            "step": step,
                            "lines": _inert_all(text),
                        }
                    )

            for index, event in enumerate(events):
                kind = event["kind"]
                if kind == EventKind.SESSION_START and not start:
                    start = event
                indexes[id(event)] = index
                entries(timeline.entries(event))
                if not (timeline.holding and kind == EventKind.SUMMARY):
                    indexes.pop(id(event), None)  # printed, or nothing to print
                mark = MARKED_KINDS.get(kind)
                if kind == EventKind.SESSION_START and event.get("restored_messages"):
                    mark = "resume"
                text = describe(event, by_agent=names_files, root=root) if mark is not None else []
                if text:
                    marks.append({"mark": mark, "kind": kind, "text": inert(text[0])})
                if kind == EventKind.MODEL_CALL and isinstance(event.get("step"), int):
                    steps[event["step"]] = _step_facts(event, marks, start)
                    marks = []
            entries(timeline.flush_entries())
            damaged = len(events.corrupt) + events.odd
        return {
            "session": session,
            "path": self._shown(os.path.join(self.workdir, "sessions", folder)),
            "agent": _label(start.get("agent")),
            "model": _label(start.get("model")),
            "context_window": start.get("context_window"),
            "by_agent": agent,
            "not_recorded": None if agent else NOT_BY_AGENT,
            "damaged_lines": damaged,
            "lines": lines,
            "steps": [steps[n] for n in sorted(steps)],
            "after_last_step": marks,
        }

    def step(self, session: str, step: int, *, full: bool = False) -> dict[str, Any]:
        """What the model was sent at `step`, rebuilt from the record, each message as text
        with the references in it marked (`parts`: text, or a path to open)."""
        messages = self._rebuild(session, step)
        shown = []
        for position, msg in enumerate(messages, start=1):
            body = "\n".join(message_lines(msg)[1:])
            cut = 0
            if not full and len(body) > BODY_CHARS:
                cut = len(body) - BODY_CHARS
                body = body[:BODY_CHARS]
            shown.append(
                {
                    "position": position,
                    "id": inert(str(msg.get("id"))),
                    "role": inert(str(msg.get("role"))),
                    "name": inert(str(msg["name"])) if msg.get("name") else None,
                    "parts": self.linked(body),
                    "chars_left_out": cut,
                }
            )
        return {"session": session, "step": step, "messages": shown}

    def diff(self, session: str, first: int, second: int) -> dict[str, Any]:
        """How the context changed from step `first` to step `second`: the messages that
        left, the ones that came in, and the ones sent both times under one id but changed."""
        before = {str(m.get("id")): m for m in self._rebuild(session, first)}
        after = {str(m.get("id")): m for m in self._rebuild(session, second)}

        def entry(msg: dict[str, Any]) -> dict[str, Any]:
            head = "\n".join(message_lines(msg)[1:])
            return {
                "id": inert(str(msg.get("id"))),
                "role": inert(str(msg.get("role"))),
                "text": inert(_first_lines(head)),
            }

        return {
            "session": session,
            "from": first,
            "to": second,
            "left": [entry(m) for i, m in before.items() if i not in after],
            "entered": [entry(m) for i, m in after.items() if i not in before],
            "changed": [
                entry(m)
                for i, m in after.items()
                if i in before and _canonical(before[i]) != _canonical(m)
            ],
            "kept": sum(1 for i in after if i in before),
        }

    # -- files and search -----------------------------------------------------------------

    def read(self, path: str, offset: int = 1) -> dict[str, Any]:
        """A stored file as the agent's Read tool shows it (numbered lines, long lines cut,
        the same confinement: no link, hard link or special file, nothing outside)."""
        from ...readback import FileToolbox

        relative = self.relative(path)
        answer = FileToolbox([self.workdir], images=False).read(relative, offset, 500)
        text = answer if isinstance(answer, str) else "\n".join(str(b) for b in answer)
        found = re.search(r"call Read with offset=(\d+) to continue\Z", text)
        return {
            "path": relative,
            "shown_as": self._shown(os.path.join(self.workdir, relative)),
            "offset": offset,
            "text": inert(text),
            "error": text.startswith("Error:"),
            "next_offset": int(found.group(1)) if found else None,
        }

    def search(
        self,
        pattern: str,
        session: str | None = None,
        *,
        fixed: bool = False,
        ignore_case: bool = False,
        limit: int = 500,
    ) -> dict[str, Any]:
        """The matches `ctxoffload grep --json` finds, from a child process of that very
        command (its deadline and its engine), at most `limit` of them, and its notes (a
        binary file it did not search, a file it could not read: its matches are kept)."""
        if session:
            self._folder(session)
        try:
            # Refused here as every door refuses it (a pattern from a page is text, as the
            # agent's is: a lone surrogate spells no bytes), not by a child that cannot be
            # given it.
            compile_matcher(pattern, ignore_case=ignore_case, fixed=fixed, backtracking=True)
        except InvalidContent as exc:
            raise CliError(str(exc)) from None
        if "\x00" in pattern:  # grep runs as a child process: no command line carries a NUL
            raise CliError(
                f"the search pattern '{inert(pattern)[:200]}' holds a NUL character, which "
                "`ctxoffload grep` cannot be given: leave it out"
            )
        command = [
            sys.executable,
            "-m",
            "ctxoffload",
            "--workdir",
            self.workdir,
            "grep",
            "--json",
            "--max-columns",
            "2000",
        ]
        command += ["-F"] if fixed else []
        command += ["-i"] if ignore_case else []
        command += ["--", pattern] + ([session] if session else [])
        try:
            done = subprocess.run(command, capture_output=True, timeout=_GREP_SECONDS, check=False)
        except subprocess.TimeoutExpired:
            raise CliError(f"the search ran longer than {_GREP_SECONDS:g} s") from None
        # grep prints its matches (a JSON list) whenever its search ran to its end, and exits 2
        # when it could not read a file (said on stderr): those matches are the answer, with
        # what it said as notes. With nothing on stdout it failed (a pattern past its
        # deadline): what it said last is why.
        if not done.stdout.strip() and done.returncode not in (0, 1):
            problem = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise CliError(problem[-1] if problem else f"grep exited {done.returncode}")
        hits = json.loads(done.stdout or b"[]")
        rows = [
            {
                # A memory file's lines belong to no session.
                "session": inert(hit["session"]) if isinstance(hit.get("session"), str) else None,
                "path": self.relative(str(hit.get("file"))),
                "shown_as": inert(self._shown(str(hit.get("file")))),
                "line": hit.get("line"),
                "text": inert(str(hit.get("text"))),
            }
            for hit in hits[:limit]
        ]
        notes = [
            inert(line.removeprefix("ctxoffload grep: "))
            for line in done.stderr.decode("utf-8", "replace").splitlines()
        ]
        return {"pattern": pattern, "matches": rows, "total": len(hits), "notes": notes}

    # -- helpers ----------------------------------------------------------------------------

    def linked(self, text: str) -> list[dict[str, str]]:
        """`text` cut into parts, each `{"text": ...}` or, for a reference into the
        workspace, `{"text": ..., "path": "sessions/..." | "data/..."}`."""
        parts: list[dict[str, str]] = []
        at = 0
        for found in self._reference.finditer(text):
            if found.start() > at:
                parts.append({"text": inert(text[at : found.start()])})
            parts.append({"text": inert(found.group(0)), "path": found.group(1)})
            at = found.end()
        if at < len(text) or not parts:
            parts.append({"text": inert(text[at:])})
        return parts

    def relative(self, path: str) -> str:
        """`path` relative to the workspace when it is inside it (as the page links it)."""
        for prefix in (self.workdir + "/", self.shown_as.rstrip("/") + "/"):
            if path.startswith(prefix):
                return path[len(prefix) :]
        return path

    def _shown(self, path: str) -> str:
        if self.shown_as != self.workdir and path.startswith(self.workdir + "/"):
            return self.shown_as.rstrip("/") + path[len(self.workdir) :]
        return path

    def _folder(self, session: str) -> str:
        """The session's folder name; CliError for a hostile or unknown id."""
        session_folder(self.workdir, session)
        return session

    def _rebuild(self, session: str, step: int) -> list[dict[str, Any]]:
        with SessionLog(self.workdir, self._folder(session)) as events:
            return step_messages(events, step)


def _step_facts(
    event: dict[str, Any], marks: list[dict[str, Any]], start: dict[str, Any]
) -> dict[str, Any]:
    window = event.get("window")
    parts = None
    if isinstance(window, dict):
        parts = {k: v for k, v in window.items() if isinstance(v, int)}
    return {
        "step": event["step"],
        "attempt": event.get("attempt"),
        "time": inert(str(event.get("time", ""))),
        "tokens_counted": event.get("tokens_counted"),
        "input_tokens": event.get("input_tokens"),
        "output_tokens": event.get("output_tokens"),
        "duration_ms": event.get("duration_ms"),
        "outcome": inert(str(event.get("outcome"))),
        "messages": len(event["messages"]) if isinstance(event.get("messages"), list) else None,
        "window": parts,
        "context_window": event.get("context_window") or start.get("context_window"),
        "trigger_tokens": event.get("trigger_tokens") or _trigger(start),
        "marks": marks,
    }


def _trigger(start: dict[str, Any]) -> int | None:
    """The trigger line of a record older than `trigger_tokens`, from its session_start."""
    window = start.get("context_window")
    config = start.get("config")
    ratio = config.get("trigger_ratio") if isinstance(config, dict) else None
    if isinstance(window, int) and isinstance(ratio, (int, float)):
        trigger = ratio * window
        return int(trigger) if math.isfinite(trigger) else None
    return None


def _label(value: Any) -> str | None:
    """A name from the record (agent, model) as the page shows it: inert text, or None."""
    return None if value is None else inert(str(value))


def _inert_all(lines: Iterable[str]) -> list[str]:
    return [inert(line) for line in lines]


def _plain(value: Any) -> Any:
    """`value` with every string made inert, for JSON meant for display."""
    if isinstance(value, str):
        return inert(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _canonical(msg: dict[str, Any]) -> str:
    return json.dumps(msg, sort_keys=True, default=str)


def _first_lines(text: str, lines: int = 3, chars: int = 300) -> str:
    head = "\n".join(text.splitlines()[:lines])
    return head if len(head) <= chars else head[:chars] + "…"
