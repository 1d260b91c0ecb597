"""deepagents: `WorkspaceBackend`, deepagents' `BackendProtocol` on a ctxoffload workspace.

deepagents keeps what it evicts (a tool result over its limit, the history a summary
replaces) in files of its backend; its default `StateBackend` keeps them in LangGraph state,
so every checkpoint serialises them again. Route those two folders to a workspace instead
through deepagents' `CompositeBackend`, and each is stored once, on disk or in a bucket:

- `/large_tool_results/<tool_call_id>` becomes the run's
  `sessions/<id>/tool_result-<tool_call_id>.txt`, the file ctxoffload writes for its own
  offloads, recorded in the session's events.jsonl, so `ctxoffload show`, `grep` and `ui`
  see it;
- `/conversation_history/<name>.md`, which deepagents rewrites whole on each summary
  (`download_files`, then `edit` with the old text plus the new section), becomes one
  tool_result file per section: text that extends a file stores only what it adds, as a
  part appended to it, so N summaries cost the history's size, not N copies of it; other
  text is a whole new version. Nothing is ever overwritten, each write is an event, and a
  read answers the last version with its parts, whole;
- other bytes (images deepagents keeps beside the history) go to the content-addressed
  `data/`, named by a `data` event.

The session is the LangGraph run's `thread_id` (read from the run's config on each call),
else the `session_id` given to the backend. deepagents' grep, glob and read tools work on
the files through the backend; `delete` is refused (the workspace keeps what a run stored;
`ctxoffload gc` removes whole sessions). Errors are answered as deepagents' error values,
never raised: a path with `..`, `.`, NUL or a backslash, or over 1024 characters, names no
file.

Importing this module does not import deepagents; `WorkspaceBackend` does (it subclasses
deepagents' `BackendProtocol`).

Example::

    from deepagents import create_deep_agent
    from deepagents.backends import CompositeBackend, StateBackend
    from ctxoffload import LocalWorkspace
    from ctxoffload.integrations.deepagents import WorkspaceBackend

    routes = WorkspaceBackend.routes(LocalWorkspace("ws"))
    backend = CompositeBackend(default=StateBackend(), routes=routes)
    agent = create_deep_agent(model=..., tools=[...], backend=backend)
"""

from __future__ import annotations

from typing import Any

__all__ = ["WorkspaceBackend"]  # noqa: F822


def __getattr__(name: str) -> Any:
    # `WorkspaceBackend` subclasses deepagents' BackendProtocol, so it is built (and
    # deepagents imported) on first use of the name, never at import.
    if name == "WorkspaceBackend":
        from ._deepagents_backend import WorkspaceBackend

        globals()[name] = WorkspaceBackend
        return WorkspaceBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
