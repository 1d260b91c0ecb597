"""The artifact index, a room of `compression`: the paths, URLs, commands and IDs of the
messages that leave (`find_artifacts`), and the index that names the ones the next context
names nowhere, each with the line of context.jsonl holding its message (`ArtifactIndex`).

The compaction core enters the room through this face only; the modules inside are how:
`_artifacts` finds the values, `_artifact_index` builds the index within its budget, `_order`
and `_layout` say in which order and on which rows, `_path_tree` folds paths into their
directories, `_search` and `_folding` look for the layout that names the most, `_whole` says
what "this text names that value" means (written whole, not inside a longer value), and
`_substrings` answers it for many values in time linear in what left.
"""

from ._artifact_index import ArtifactIndex, events_file
from ._artifacts import (
    CUT_MARK,
    NEWLINE_MARK,
    ArtifactCache,
    FoundArtifact,
    find_artifacts,
    message_artifacts,
    message_commands,
    named_values,
    scan_messages,
)
from ._search import IndexClock

__all__ = [
    "CUT_MARK",
    "NEWLINE_MARK",
    "ArtifactCache",
    "ArtifactIndex",
    "FoundArtifact",
    "IndexClock",
    "events_file",
    "find_artifacts",
    "message_artifacts",
    "message_commands",
    "named_values",
    "scan_messages",
]
