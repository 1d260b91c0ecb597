"""Safe names: session ids are validated, tool-call ids are made safe without being rejected."""

from __future__ import annotations

from ..exceptions import InvalidSessionId

# `re` is imported where a pattern is needed, not here: with `enum` it costs ~6 ms of every
# `ctxoffload` command's start-up, and a plain `ctxoffload grep` checks session names only
# (`is_session_id`, by the characters themselves).

__all__ = [
    "SESSION_ID_PATTERN",
    "child_prefix",
    "door_session",
    "is_session_id",
    "session_id_for",
    "session_ids_among",
    "session_named",
    "tool_file_stem",
    "validate_session_id",
]

# ASCII only: a look-alike such as U+2215 (division slash) or U+FF0E (fullwidth full stop)
# must not pass as a plain name. The first character may not be '.', which rules out '.',
# '..' and hidden directories.
SESSION_ID_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}"
"""A plain session id, the one pattern for it (matched whole); others build theirs from it.
`is_session_id` checks the same characters without compiling it."""
_MAX_SESSION_ID = 128
# The characters of a plain tool-call id, and of a session id, which may not begin with the
# last two ('.' and '-'). ASCII only, as in the pattern: `str.strip` of these leaves
# whatever else a name holds.
_TOOL_ID_CHARACTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
_SESSION_ID_CHARACTERS = _TOOL_ID_CHARACTERS + "."
_MAX_PLAIN_TOOL_ID = 100
_UNSAFE_RUN = r"[^A-Za-z0-9_-]+"
# What `session_id_for` ends a name it made with: '.' and 16 hex digits of a sha256.
_MAPPED_TAIL = r"\.[0-9a-f]{16}\Z"


def _show(value: str, limit: int = 40) -> str:
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value)} characters)"


def is_session_id(name: str) -> bool:
    """Whether `name` is a plain name `validate_session_id` accepts: a folder of sessions/
    named otherwise (planted: a newline, a look-alike slash) is no session of this workspace.
    (`SESSION_ID_PATTERN` matched whole, read character by character.)"""
    return (
        0 < len(name) <= _MAX_SESSION_ID
        and name[0] not in ".-"
        and not name.strip(_SESSION_ID_CHARACTERS)
    )


def session_ids_among(names: list[str]) -> list[str]:
    """The names of `names` that are session ids (`is_session_id`), in their order.

    When every name is one, that is known from all of them at once: their characters, in one
    string (`str.strip` of the characters a session id may hold leaves nothing), their
    longest, and the first character of the least: '.' and '-', which may not begin a session
    id, are the least characters it may hold, so the least name begins with one if any does.
    The 10,000 names of a workspace's sessions/ are taken in 1.1 ms so, against 2.4 ms name
    by name (`ctxoffload grep` lists them before it searches). Otherwise each name is judged.
    """
    if (
        names
        and min(names)[:1] not in ("", ".", "-")
        and max(map(len, names)) <= _MAX_SESSION_ID
        and not "".join(names).strip(_SESSION_ID_CHARACTERS)
    ):
        return names
    return [name for name in names if is_session_id(name)]


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
    if not is_session_id(session_id):
        raise InvalidSessionId(
            f"session_id {_show(session_id)} is not a plain name: use 1-128 ASCII letters, "
            "digits, '.', '_' or '-', not starting with '.'"
        )
    return session_id


def session_id_for(thread: object) -> str:
    """The session of a host's thread or conversation id (LangGraph's `thread_id`, a Claude
    Code session, an agent's name for its memory folder...): the one rule every door follows.

    A plain name (`is_session_id`) is its own session, unless it ends the way a mapped name
    does ('.' and 16 hex digits). Any other id becomes its safe characters (at most 80), '.'
    and 16 hex digits of the sha256 of the original. So a host's id never names a path, two
    ids never share a session, and a mapped name never equals an id someone can pass as it
    is: an id shaped like a mapped name is itself mapped (to another name), as an escape
    character escapes itself. Map each host id once: a mapped name mapped again is another
    session.
    """
    text = thread if isinstance(thread, str) else str(thread)
    import re

    if is_session_id(text) and re.search(_MAPPED_TAIL, text) is None:
        return text
    import hashlib  # not at import: see tool_file_stem

    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    safe = re.sub(_UNSAFE_RUN, "_", text)[:80].lstrip("-._") or "thread"
    return f"{safe}.{digest}"


def door_session(door: str, purpose: str) -> str:
    """The session a door keeps for itself (what it records outside any conversation):
    `{door}.{purpose}.` and 16 hex digits, a name `session_id_for` never gives a host's
    conversation (its mapped names hold no '.' before the digits, and an id of this shape
    passed as it is gets mapped), so no user's conversation can write or read it."""
    import hashlib  # not at import: see tool_file_stem

    digest = hashlib.sha256(f"{door}\0{purpose}".encode()).hexdigest()[:16]
    return validate_session_id(f"{door}.{purpose}.{digest}")


def session_named(text: str) -> str:
    """The session a person names with `text` (a `ctxoffload` command's SESSION): a plain
    name is the session's own folder name, taken as it is (`team_alice_42.4518827876801fc9`,
    as `ls` lists it); anything else is a host's own conversation id (`team/alice:42`),
    mapped by `session_id_for`, the rule every door stored it by. So a command finds a
    host's conversation by the id the host knows it by, and never takes a path."""
    return text if is_session_id(text) else session_id_for(text)


def tool_file_stem(tool_id: object) -> str:
    """Map any tool-call id to a file-name stem that is safe and never shared by two ids.

    Ids that are already plain (letters, digits, '_' and '-', at most 100) are kept as they
    are, so `tool_result-call_abc123.txt` is what a person expects to find. Any other id
    keeps its safe characters and gets '.' plus 16 hex digits of the sha256 of the original;
    plain ids never contain '.', so a rewritten id can never equal a kept one.
    """
    text = tool_id if isinstance(tool_id, str) else repr(tool_id)
    if 0 < len(text) <= _MAX_PLAIN_TOOL_ID and not text.strip(_TOOL_ID_CHARACTERS):
        return text
    import hashlib  # not at import: it costs ~6 ms of every `ctxoffload` command's start
    import re

    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    cleaned = re.sub(_UNSAFE_RUN, "_", text)[:48].strip("_") or "id"
    return f"{cleaned}.{digest}"


def child_prefix(parent: str, name: str) -> str:
    """`{parent}--{name}`, what a child's session id starts with (`new_session` adds
    `-{6 hex}`): the name with anything but ASCII letters, digits, `_` and `-` replaced by `_`
    and cut to 40 characters, the parent's id cut so that the whole id fits the 128
    characters a session id may have."""
    import re

    plain = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:40] or "agent"
    tail = f"--{plain}"
    return parent[: 128 - len(tail) - len("-123456")] + tail
