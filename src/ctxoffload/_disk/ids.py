"""Safe names: session ids are validated, tool-call ids are made safe without being rejected."""

from __future__ import annotations

import re

from ..exceptions import InvalidSessionId

__all__ = ["is_session_id", "session_id_for", "tool_file_stem", "validate_session_id"]

# ASCII only: a look-alike such as U+2215 (division slash) or U+FF0E (fullwidth full stop)
# must not pass as a plain name. The first character may not be '.', which rules out '.',
# '..' and hidden directories.
_SESSION_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
_PLAIN_TOOL_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")
_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9_-]+")


def _show(value: str, limit: int = 40) -> str:
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value)} characters)"


def is_session_id(name: str) -> bool:
    """Whether `name` is a plain name `validate_session_id` accepts: a folder of sessions/
    named otherwise (planted: a newline, a look-alike slash) is no session of this workspace."""
    return _SESSION_ID.fullmatch(name) is not None


def validate_session_id(session_id: object) -> str:
    """Return `session_id` if it is a plain name, else raise `InvalidSessionId`.

    A plain name is 1-128 ASCII letters, digits, '.', '_' or '-', not starting with '.'.

    Raises:
        InvalidSessionId: for anything else, before any file is touched.
    """
    if not isinstance(session_id, str):
        raise InvalidSessionId(
            f"session_id must be a str, got {type(session_id).__name__} {session_id!r}"
        )
    if _SESSION_ID.fullmatch(session_id) is None:
        raise InvalidSessionId(
            f"session_id {_show(session_id)} is not a plain name: use 1-128 ASCII letters, "
            "digits, '.', '_' or '-', not starting with '.'"
        )
    return session_id


def session_id_for(thread: object) -> str:
    """The session of a host's thread or conversation id (LangGraph's `thread_id`, ...): the
    id itself when it is a plain name, else its safe characters (at most 80), '.' and 16 hex
    digits of the sha256 of the original, so a host's id never names a path and two ids never
    share a session. The one rule every adapter follows."""
    text = thread if isinstance(thread, str) else str(thread)
    if is_session_id(text):
        return text
    import hashlib  # not at import: see tool_file_stem

    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    safe = _UNSAFE_RUN.sub("_", text)[:80].lstrip("-._") or "thread"
    return f"{safe}.{digest}"


def tool_file_stem(tool_id: object) -> str:
    """Map any tool-call id to a file-name stem that is safe and never shared by two ids.

    Ids that are already plain (letters, digits, '_' and '-', at most 100) are kept as they
    are, so `tool_result-call_abc123.txt` is what a person expects to find. Any other id
    keeps its safe characters and gets '.' plus 16 hex digits of the sha256 of the original;
    plain ids never contain '.', so a rewritten id can never equal a kept one.
    """
    text = tool_id if isinstance(tool_id, str) else repr(tool_id)
    if _PLAIN_TOOL_ID.fullmatch(text):
        return text
    import hashlib  # not at import: it costs ~6 ms of every `ctxoffload` command's start

    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    cleaned = _UNSAFE_RUN.sub("_", text)[:48].strip("_") or "id"
    return f"{cleaned}.{digest}"
