"""Where content goes: `LocalWorkspace` (disk, the default), `InMemoryWorkspace` and
`ObjectStoreWorkspace` (S3 and friends, loaded on first use)."""

from ._gc import GcReport
from ._ids import tool_file_stem, validate_session_id
from ._local import LocalWorkspace
from ._memory import InMemoryWorkspace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._objectstore import ObjectStoreWorkspace

__all__ = [
    "GcReport",
    "InMemoryWorkspace",
    "LocalWorkspace",
    "ObjectStoreWorkspace",
    "tool_file_stem",
    "validate_session_id",
]


def __getattr__(name: str) -> object:
    if name == "ObjectStoreWorkspace":
        from ._objectstore import ObjectStoreWorkspace

        return ObjectStoreWorkspace
    raise AttributeError(f"module 'ctxoffload.workspace' has no attribute {name!r}")
