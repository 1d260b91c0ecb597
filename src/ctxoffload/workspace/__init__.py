"""Where content goes: `LocalWorkspace` (disk, the default), `InMemoryWorkspace`,
`ObjectStoreWorkspace` (S3 and friends) and `SqlWorkspace` (SQLite), each a `Workspace`;
each is imported on first use.

This face holds what a user of a workspace calls: the four backends, the protocols a backend
or a caller is typed with, the entry points for leases, forks and new sessions, compaction
asked for from outside (`request_compaction`), the writer's identity, and the errors those
raise. How the files are laid out, written and read back is the private core
`ctxoffload._disk`, which every package imports directly.
"""

from .._lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .._disk.compact_requests import request_compaction
    from .._disk.writer import writing_as
    from ..exceptions import InvalidSessionId, SessionBusyError
    from ._fork import fork_session
    from ._gc import GcReport
    from ._lease import LeaseHolder, SessionLease, take_lease
    from ._local import LocalWorkspace
    from ._memory import InMemoryWorkspace
    from ._new_session import new_session, take_new_session
    from ._objectstore import ObjectStoreWorkspace
    from ._protocol import (
        EventBatches,
        EventLog,
        GarbageCollector,
        HistoryLog,
        LineReader,
        ModelCallClock,
        Offloader,
        ReferenceReader,
        StateStore,
        Workspace,
    )
    from ._sql import SqlWorkspace

__all__ = [
    "EventBatches",
    "EventLog",
    "GarbageCollector",
    "GcReport",
    "HistoryLog",
    "InMemoryWorkspace",
    "InvalidSessionId",
    "LeaseHolder",
    "LineReader",
    "LocalWorkspace",
    "ModelCallClock",
    "ObjectStoreWorkspace",
    "Offloader",
    "ReferenceReader",
    "SessionBusyError",
    "SessionLease",
    "SqlWorkspace",
    "StateStore",
    "Workspace",
    "fork_session",
    "new_session",
    "request_compaction",
    "take_lease",
    "take_new_session",
    "writing_as",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    globals(),
    {
        "writing_as": ".._disk.writer",
        "InvalidSessionId": "..exceptions",
        "SessionBusyError": "..exceptions",
        "request_compaction": ".._disk.compact_requests",
        "fork_session": "._fork",
        "GcReport": "._gc",
        "LeaseHolder": "._lease",
        "SessionLease": "._lease",
        "take_lease": "._lease",
        "LocalWorkspace": "._local",
        "InMemoryWorkspace": "._memory",
        "new_session": "._new_session",
        "take_new_session": "._new_session",
        "ObjectStoreWorkspace": "._objectstore",
        "SqlWorkspace": "._sql",
        "EventBatches": "._protocol",
        "EventLog": "._protocol",
        "GarbageCollector": "._protocol",
        "HistoryLog": "._protocol",
        "LineReader": "._protocol",
        "ModelCallClock": "._protocol",
        "Offloader": "._protocol",
        "ReferenceReader": "._protocol",
        "StateStore": "._protocol",
        "Workspace": "._protocol",
    },
)
