"""What leaves the context and how it comes back: the tools an agent reads offloaded content
back with.

`retrieval_tool` (`retrieve_offloaded_content`) reads any reference a workspace returned, on
disk, in memory or in a bucket; `workspace_tools` gives Read, Grep and Glob confined to a
workspace on a local folder. Both cap what they return, so reading an offloaded file never
produces a result that is offloaded again. `memory_tool` gives an agent the files it keeps
across sessions, in the workspace's `memories/` folder, with the commands of Anthropic's
memory tool.
"""

# Reading back, one job per module: `_confine` (the roots, a path resolved inside them, the
# verified open), `_listing` and `_globs` (the paths a folder or a glob names), `_lines`
# (numbered lines), `_window` (Read's window on a file), `_matches` (match with context),
# `_images` and `_arguments` (what a model passes); the search engine (patterns compiled,
# `escape`, RE2) and the binary-or-text sniff are `ctxoffload._search`, shared with the CLI
# and the agent; the tools are built from them: `_read_tool`, `_grep` and `_toolbox` (Read,
# Grep, Glob), `_retrieval` and `_tool` (the retrieval tool), each marked by `_marks` as a
# reader; `_memory` (the memory tool) with `_memory_paths` (what a model may name, which folder
# it is), `_memory_text` (its answers and edits) and `_memory_files` (its files on disk).

from .._lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .._search.regex import escape, reads_whole_text
    from ._confine import resolve_in_roots
    from ._lines import lines_as_read
    from ._memory import memory_tool
    from ._retrieval import retrieve_offloaded_content
    from ._tool import RETRIEVAL_TOOL_NAME, retrieval_tool
    from ._toolbox import FileToolbox, HasWorkdir, workspace_tools

__all__ = [
    "RETRIEVAL_TOOL_NAME",
    "FileToolbox",
    "HasWorkdir",
    "escape",
    "lines_as_read",
    "memory_tool",
    "reads_whole_text",
    "resolve_in_roots",
    "retrieval_tool",
    "retrieve_offloaded_content",
    "workspace_tools",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    globals(),
    {
        "resolve_in_roots": "._confine",
        "escape": ".._search.regex",
        "lines_as_read": "._lines",
        "memory_tool": "._memory",
        "reads_whole_text": ".._search.regex",
        "retrieve_offloaded_content": "._retrieval",
        "RETRIEVAL_TOOL_NAME": "._tool",
        "retrieval_tool": "._tool",
        "FileToolbox": "._toolbox",
        "HasWorkdir": "._toolbox",
        "workspace_tools": "._toolbox",
    },
)
