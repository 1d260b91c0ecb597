"""Where content goes: `LocalWorkspace` (disk, the default), `InMemoryWorkspace` and
`ObjectStoreWorkspace` (S3 and friends), each a `Workspace`; each is imported on first use."""

from .._lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._gc import GcReport
    from ._ids import tool_file_stem, validate_session_id
    from ._local import LocalWorkspace
    from ._memory import InMemoryWorkspace
    from ._objectstore import ObjectStoreWorkspace
    from ._protocol import (
        EventLog,
        GarbageCollector,
        ModelCallClock,
        Offloader,
        ReferenceReader,
        StateStore,
        Workspace,
    )

__all__ = [
    "EventLog",
    "GarbageCollector",
    "GcReport",
    "InMemoryWorkspace",
    "LocalWorkspace",
    "ModelCallClock",
    "ObjectStoreWorkspace",
    "Offloader",
    "ReferenceReader",
    "StateStore",
    "Workspace",
    "tool_file_stem",
    "validate_session_id",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    globals(),
    {
        "GcReport": "._gc",
        "tool_file_stem": "._ids",
        "validate_session_id": "._ids",
        "LocalWorkspace": "._local",
        "InMemoryWorkspace": "._memory",
        "ObjectStoreWorkspace": "._objectstore",
        "EventLog": "._protocol",
        "GarbageCollector": "._protocol",
        "ModelCallClock": "._protocol",
        "Offloader": "._protocol",
        "ReferenceReader": "._protocol",
        "StateStore": "._protocol",
        "Workspace": "._protocol",
    },
)
