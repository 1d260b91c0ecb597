"""Following the sessions of a workspace as they change, without following links out of it.

watchfiles' recursive watch walks every folder under the one it is given, through symbolic
links: a link planted in a session folder, to `/` or to any big tree, would have it watch (and
report changes in) folders outside the workspace, using up the system's inotify watches on the
way. The layout is flat (`sessions/<id>/<file>`), so a watch of sessions/ and one of each
session folder, none recursive, see every change a session's files go through. When an entry
of sessions/ changes (a session appears or goes), the sessions are listed again and watched
anew. A link in sessions/ is no session (`session_ids`), so none is watched.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

from .._disk.layout import SESSIONS_DIR
from ._access import session_ids

__all__ = ["watch_sessions"]


def watch_sessions(workdir: str, session: str | None = None, **options: Any) -> Iterator[set[str]]:
    """The names of the sessions that changed, each time watchfiles reports (an empty set
    when it reports nothing, with `yield_on_timeout`).

    After the sessions are listed again, the first report names every session listed: what
    was written while no watch was in place is not missed.

    Args:
        workdir: the workspace folder.
        session: only this session's folder; None: every session, and sessions/ itself for
            the sessions that appear.
        **options: passed to `watchfiles.watch` (`stop_event`, `debounce`, `rust_timeout`,
            `yield_on_timeout`...).

    Returns when `stop_event` is set.

    Raises:
        OSError: the folder cannot be watched (the session's folder, when `session` is given).
    """
    import watchfiles

    sessions = os.path.normpath(os.path.join(workdir, SESSIONS_DIR))
    stop = options.get("stop_event")
    listed_again = False
    while stop is None or not stop.is_set():
        if session is not None:
            names = [session]
            folders = [os.path.join(sessions, session)]
        else:
            try:
                names = session_ids(workdir)
            except OSError:
                # sessions/ went, or a link or a file took its place: nothing inside the
                # workspace to watch. Look again in a moment, and say so (an empty report)
                # so that a caller that polls goes on polling.
                time.sleep((options.get("rust_timeout") or 1000) / 1000)
                listed_again = True
                yield set()
                continue
            folders = [sessions] + [os.path.join(sessions, name) for name in names]
        try:
            for changes in watchfiles.watch(*folders, recursive=False, **options):
                touched = {name for _, path in changes if (name := _session_of(path, sessions))}
                if listed_again:
                    touched |= set(names)
                    listed_again = False
                yield touched
                if session is None and any(
                    os.path.dirname(os.path.normpath(path)) == sessions for _, path in changes
                ):
                    break  # a session came or went: list them again
            else:
                return  # stopped
        except FileNotFoundError:
            if session is not None:
                raise
            # A session folder went between the listing and the watch: list them again.
        listed_again = True


def _session_of(path: str, sessions: str) -> str | None:
    """The first name under sessions/ in `path` (a session's name), or None."""
    relative = os.path.relpath(path, sessions).split(os.sep)
    return relative[0] if relative and relative[0] not in ("", ".", "..") else None
