"""Where content goes: `LocalWorkspace` (disk, the default) and `InMemoryWorkspace`."""

from ._gc import GcReport
from ._ids import tool_file_stem, validate_session_id
from ._local import LocalWorkspace
from ._memory import InMemoryWorkspace

__all__ = [
    "GcReport",
    "InMemoryWorkspace",
    "LocalWorkspace",
    "tool_file_stem",
    "validate_session_id",
]
