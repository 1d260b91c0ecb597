"""A session's events as a stream (`SessionLog`) and the messages the model was sent at one
step, rebuilt from them (`show`, the viewer's timeline and step view)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

from ..._disk.commit import JsonLines
from ..._disk.events import EventKind, is_event
from ..._disk.layout import EVENTS_FILE, SESSIONS_DIR
from ..._disk.read import Folder
from ...exceptions import CliError
from .._access import open_in
from .._arguments import EXIT_PROBLEMS, EXIT_USAGE
from .._output import shown

__all__ = ["SessionLog", "step_messages"]


class SessionLog:
    """The session's events.jsonl, read as a stream through the workspace's reader, as many
    times as the reader needs: memory holds one line at a time (the longest line bounds
    it), never the whole log. Each pass stops where the log ended when it was opened, so an
    agent still writing does not make two passes disagree.

    A torn last line (a write in progress) is skipped silently. A line that is not JSON, or
    JSON that is not an event (an object with a kind), is skipped and counted (`corrupt`,
    `odd`), and `warn` says so once on stderr.

    Raises (on entering):
        CliError: the file has other hard links or cannot be read (exit 2).
    """

    def __init__(self, workdir: str, session: str) -> None:
        self.workdir = workdir
        self.session = session
        self.corrupt: list[int] = []
        self.odd = 0
        self._stack = contextlib.ExitStack()
        self._fd = -1
        self._end = 0
        self.path = ""

    def __enter__(self) -> SessionLog:
        folder = self._stack.enter_context(Folder(self.workdir, SESSIONS_DIR, self.session))
        self.path = folder.path(EVENTS_FILE)
        opened = open_in(folder, EVENTS_FILE, self.path)
        if opened is not None:
            self._fd, st = opened
            self._stack.callback(os.close, self._fd)
            self._end = st.st_size
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Every event, oldest first; counts what is skipped."""
        if self._fd < 0:
            return
        lines = JsonLines(self._fd, self._end)
        odd = 0
        try:
            for _, value in lines:
                if is_event(value):
                    yield value
                else:
                    odd += 1
        except OSError as exc:  # a read that failed after the open (EIO)
            raise CliError(f"cannot read {shown(self.path)}: {exc.strerror or exc}") from None
        self.corrupt, self.odd = lines.corrupt, odd

    def warn(self, command: str) -> bool:
        """Say what the last whole pass skipped, once, as `command`; whether anything was."""
        bad, odd = self.corrupt, self.odd
        if bad:
            print(
                f"ctxoffload {command}: warning: {shown(self.path)} line {bad[0]} is not "
                "valid JSON"
                + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "")
                + ": skipped; `ctxoffload verify` checks the workspace",
                file=sys.stderr,
            )
        if odd:
            print(
                f"ctxoffload {command}: warning: {shown(self.path)}: {odd:,} JSON "
                f"line{' is' if odd == 1 else 's are'} not an event (an object with a kind): "
                "skipped; `ctxoffload verify` checks the workspace",
                file=sys.stderr,
            )
        return bool(bad or odd)


def step_messages(events: SessionLog, step: int) -> list[dict[str, Any]]:
    """The messages the model was sent at `step`, rebuilt from the record.

    Two passes, so that memory holds the step's messages only, not every message logged:
    the first finds the ids the step was sent, the second keeps only those messages.

    Raises:
        CliError: the record cannot rebuild the step (exit 1), or no model call has that
            step (exit 2; the message names the steps recorded).
    """
    from ..._disk.read import rebuild_step
    from ...exceptions import IncompleteRecord

    wanted: set[str] = set()
    steps: set[int] = set()
    for event in events:
        if event["kind"] == EventKind.MODEL_CALL and isinstance(event.get("step"), int):
            steps.add(event["step"])
            ids = event.get("messages")
            if event["step"] == step and isinstance(ids, list):
                wanted.update(i for i in ids if isinstance(i, str))

    def needed() -> Iterator[dict[str, Any]]:
        for event in events:
            if event["kind"] == EventKind.MESSAGE:
                message = event.get("message")
                if not isinstance(message, dict) or str(message.get("id")) not in wanted:
                    continue
            elif event["kind"] != EventKind.MODEL_CALL:
                continue
            yield event

    try:
        return rebuild_step(needed(), step)
    except IncompleteRecord as exc:
        raise CliError(str(exc), EXIT_PROBLEMS) from None
    except LookupError as exc:
        known = f"steps {min(steps)}-{max(steps)}" if steps else "no model calls"
        raise CliError(f"{exc} ({known} are recorded)", EXIT_USAGE) from None
