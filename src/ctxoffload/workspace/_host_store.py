"""A workspace given where a host framework's own store belongs: `AsksForAStore`.

Haystack's `ToolResultOffloadHook` and `ToolResultOffloadCompactor` take a `ToolResultStore`,
and Strands' `ContextOffloader` a storage; ctxoffload's door for each wraps a workspace in the
host's type (`WorkspaceResultStore`, `WorkspaceStorage`). Given the workspace itself, the host
keeps it without a word, asks it at its first result for what a store has, finds nothing, and
leaves the result whole in the context: a 750 KB result stayed there, nothing was stored, and
Haystack logged only "'LocalWorkspace' object has no attribute 'write'". Neither host checks
what it is given when it is built, so the first moment ctxoffload can say it is that first
question: the workspace says then, once, as a warning of the `ctxoffload` logger (which
Python's default logging shows), what to pass instead, and the `AttributeError` the host gets
names it too.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, NoReturn

__all__ = ["AsksForAStore"]

logger = logging.getLogger("ctxoffload")

_HAYSTACK = (
    "Haystack's ToolResultOffloadHook or ToolResultOffloadCompactor",
    "WorkspaceResultStore(workspace, session_id=...) (ctxoffload.integrations.haystack)",
)
_STRANDS = (
    "Strands' ContextOffloader or storage=",
    "WorkspaceStorage(workspace, session_id=...) (ctxoffload.integrations.strands)",
)

_ASKED_BY = {
    # Haystack's hook asks for this one first, at every fresh result (`getattr(store,
    # "supports_binary_content", False)`); Strands' ContextOffloader for `store` and
    # `retrieve` when it is built (`hasattr`).
    "supports_binary_content": (_HAYSTACK,),
    "write": (_HAYSTACK, _STRANDS),
    "store": (_STRANDS,),
    "retrieve": (_STRANDS,),
}
"""The names a host asks its store for that no workspace has, and the hosts that ask."""


class AsksForAStore:
    """A workspace asked for a name only a host's own store has (`_ASKED_BY`) says where it
    was given by mistake and what to give instead: once per workspace as a warning, and in
    the `AttributeError` every time. Any other name it lacks is Python's own
    `AttributeError`."""

    if not TYPE_CHECKING:  # (for the type checker, a workspace has no name it does not say)

        def __getattr__(self, name: str) -> NoReturn:
            hosts = _ASKED_BY.get(name)
            if hosts is None:
                raise AttributeError(
                    f"{type(self).__name__!r} object has no attribute {name!r}",
                    name=name,
                    obj=self,
                )
            what = type(self).__name__
            asker = " or ".join(host for host, _ in hosts)
            fix = "; or ".join(f"{wrapper} to {host}" for host, wrapper in hosts)
            said = (
                f"{what} was given where a host's own store belongs: {asker} asked it for "
                f"{name!r}, which no workspace has, so nothing is stored through it and each "
                f"result stays whole in the context. Pass {fix}, not the workspace itself"
            )
            if not self.__dict__.get("_said_not_a_store"):
                self.__dict__["_said_not_a_store"] = True
                logger.warning("%s", said)
            raise AttributeError(f"{what!r} object has no attribute {name!r}: {said}")
