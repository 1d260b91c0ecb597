"""Moving a session's files to another workspace: the references they hold rewritten.

A workspace writes its own prefix into what it stores: `context.jsonl` names data/ files
(`/srv/ws/data/<sha256>.png`, `sqlite:////srv/agents.db/data/...`), events name the files
they record, a tool result's `<data .../>` lines and state.json name data/ files and logs.
When a session moves (`ctxoffload export` to a folder, `ctxoffload import` into a database or
a bucket), those references must name the copy, or they would point at the workspace left
behind. `relocate` rewrites exactly the references into the old workspace's layout: a
prefix followed by `/sessions/` or `/data/`; nothing else in a line changes, so line numbers
and every other byte stay.

`prefixes_named` finds which prefixes a session's own events used (a folder reached through
a link, or moved since, is named by its old path), beside the workspace's own.
"""

from __future__ import annotations

from .layout import DATA_DIR, SESSIONS_DIR

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["prefixes_named", "relocate", "relocation_problem"]


# A prefix with one of these would need escaping where it is written (a JSON string, the
# quoted attribute of a `<data .../>` line): such a workspace is not a relocation target.
_NEEDS_ESCAPING = frozenset("\"'\\<>&") | frozenset(chr(c) for c in range(32)) | {"\x7f"}


def relocation_problem(prefix: str) -> str | None:
    """Why references cannot be rewritten to start with `prefix` (a character that JSON or a
    `<data .../>` line would escape), or None when they can."""
    bad = sorted({c for c in prefix if c in _NEEDS_ESCAPING})
    if not bad:
        return None
    return (
        f"{prefix!r} holds {', '.join(repr(c) for c in bad)}, which a reference cannot hold as is"
    )


def relocate(body: bytes, old: Iterable[str], new: str) -> bytes:
    """`body` with each reference into a workspace at one of the `old` prefixes made to name
    the same file under `new` (`{old}/sessions/...` -> `{new}/sessions/...`, and data/).

    References are matched as written (a JSON string leaves `/` and non-ASCII letters as
    they are); a prefix that JSON would escape is never written by a workspace to begin
    with, and `new` must be one that needs no escaping (`relocation_problem`).

    Args:
        body: a file's bytes (any encoding: the prefixes are matched as UTF-8 bytes).
        old: the prefixes the references may start with (a folder's path, a store's URL),
            without a trailing slash.
        new: the prefix they get.
    """
    for prefix in sorted(set(old), key=len, reverse=True):  # longest first: nested prefixes
        if not prefix or prefix == new:
            continue
        for folder in (SESSIONS_DIR, DATA_DIR):
            before = f"{prefix}/{folder}/".encode()
            if before in body:
                body = body.replace(before, f"{new}/{folder}/".encode())
    return body


def prefixes_named(event_lines: Iterable[bytes], session_id: str) -> set[str]:
    """The workspace prefixes a session's events name their own files under: for each
    `reference` ending in `/sessions/<session_id>/<name>`, what comes before it.

    Args:
        event_lines: the lines of the session's events.jsonl; one that does not read (torn,
            not JSON, nested deeper than any the workspace writes) names none.
        session_id: the session whose events they are.
    """
    from .._depth import load_json

    found: set[str] = set()
    marker = f"/{SESSIONS_DIR}/{session_id}/"
    for line in event_lines:
        try:
            event = load_json(line)
        except ValueError:
            continue
        reference = event.get("reference") if isinstance(event, dict) else None
        if isinstance(reference, str) and marker in reference:
            head, _, name = reference.rpartition(marker)
            if head and name and "/" not in name:
                found.add(head)
    return found
