"""Where content goes: `LocalWorkspace` (disk, the default), `InMemoryWorkspace` and
`ObjectStoreWorkspace` (S3 and friends); each is imported on first use."""

from .._lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._gc import GcReport
    from ._ids import tool_file_stem, validate_session_id
    from ._local import LocalWorkspace
    from ._memory import InMemoryWorkspace
    from ._objectstore import ObjectStoreWorkspace

__all__ = [
    "GcReport",
    "InMemoryWorkspace",
    "LocalWorkspace",
    "ObjectStoreWorkspace",
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
    },
)
