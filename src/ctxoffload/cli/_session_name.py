"""A command's SESSION argument: the folder name it stands for and the words a message uses
for it (imported by the argument parsers and by the workspace openers, which `_arguments`
imports: a module of its own keeps them out of each other's way)."""

from __future__ import annotations

__all__ = ["SessionName", "said_session"]


class SessionName(str):
    """A command's SESSION, as the session's folder name (`session_named`: a plain name as
    it is, a host's own conversation id mapped by the rule the doors store it by), keeping
    what was typed in `given` for the messages. The `type=` of every SESSION argument."""

    given: str

    def __new__(cls, text: str) -> SessionName:
        from .._disk.ids import session_named  # not at start-up: it loads `re`

        made = super().__new__(cls, session_named(text))
        made.given = text
        return made


def said_session(session: str) -> str:
    """A session as a message names it: `'run-42'`, or for a host's id
    `'team/alice:42' (a host's id, stored as 'team_alice_42.4518827876801fc9')`."""
    given = session.given if isinstance(session, SessionName) else session
    if given == session:
        return repr(str(session))
    return f"{given!r} (a host's id, stored as {str(session)!r})"
