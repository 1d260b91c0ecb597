"""`ReaderTools`: the names of the tools an agent has for reading offloaded content back.

Truncation notices and summaries tell the model how to read what left its context; they
must name tools the model really has. ctxoffload's own `Agent` registers `Read`, `Grep` and
`retrieve_offloaded_content`; AgentScope calls its reader `view_text_file`, other
frameworks `read_file`; an agent with an `InMemoryWorkspace` or a custom offloader has no
file tools at all, only a retrieval tool that takes the reference.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import BaseModel, ConfigDict

__all__ = ["READER_TOOL_NAMES", "ReaderTools", "how_to_read", "how_to_search"]

# ctxoffload's own reader tools, whose arguments the notice can spell out exactly (the
# retrieval tool's name is `readback.RETRIEVAL_TOOL_NAME`, which the pillars below this one
# cannot import: tests/compression/test_notice.py holds the two equal).
_OWN_READ = "Read"
_OWN_GREP = "Grep"
_OWN_RETRIEVE = "retrieve_offloaded_content"

READER_TOOL_NAMES = frozenset({_OWN_READ, _OWN_GREP, "Glob", _OWN_RETRIEVE})
"""ctxoffload's reader tools: what a tool result's name says when no one declared which tools
read back (`Compressor.reads_back`): a framework's agent whose tools carry these names."""


class ReaderTools(BaseModel):
    """Which tools the agent has to read offloaded content back; None for a missing one.

    Attributes:
        read: a tool that reads a file by path from a line (ctxoffload's `Read(path,
            offset, limit)`, AgentScope's `view_text_file`, ...).
        grep: a tool that searches a file by path for a pattern (ctxoffload's `Grep(pattern,
            path_or_glob)`).
        retrieve: the retrieval tool, which reads any offloader's references, file paths
            or not: `retrieve(reference, pattern=None, line_range=None, context_lines=None)`
            (ctxoffload's `retrieve_offloaded_content`).

    With none of them known, notices say "your file tools". With a retrieval tool only,
    notices name it with its arguments. For ctxoffload's own `Read` and `Grep`, notices
    give the exact call; for other names, the tool, the path and the line to start at.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    read: str | None = None
    grep: str | None = None
    retrieve: str | None = None

    @property
    def known(self) -> bool:
        """Whether any reader tool is named."""
        return bool(self.read or self.grep or self.retrieve)

    @classmethod
    def among(cls, names: Iterable[str] | Mapping[str, str]) -> ReaderTools:
        """ctxoffload's reader tools among the tools an agent was given, by what each does:
        `Read` reads, `Grep` searches, `retrieve_offloaded_content` retrieves (none of them:
        nothing known, and notices say "your file tools").

        Every door names its readers so, from the tools it gives (`Compressor(reader_tools=
        ReaderTools.among(...))`): what a notice tells the model to call is then a tool it has.

        Args:
            names: the names of the tools given; or a mapping of each tool's own name to the
                name it is listed with (the MCP proxy renames a tool the wrapped server's
                own name takes).
        """
        listed = names if isinstance(names, Mapping) else {name: name for name in names}
        return cls(
            read=listed.get(_OWN_READ),
            grep=listed.get(_OWN_GREP),
            retrieve=listed.get(_OWN_RETRIEVE),
        )


def how_to_read(
    reference: str, next_line: int | None, readers: ReaderTools | None, *, compact: bool = False
) -> str:
    """The sentence that tells the model how to read on in `reference`, and to search it.

    Args:
        reference: the path (or other reference) the offloader returned.
        next_line: the first line not shown, or None when every line was shown.
        readers: the agent's reader tools; None or empty for the generic wording.
        compact: the few-word form for tight limits.
    """
    readers = readers or ReaderTools()
    if compact:
        return _compact(next_line, readers)
    ref = repr(reference)
    if not (readers.read or readers.grep) and readers.retrieve:
        tool = readers.retrieve
        read = (
            f"{tool}(reference={ref}, line_range=[{next_line}, {next_line + 199}])"
            if next_line is not None
            else None
        )
        search = f"{tool}(reference={ref}, pattern='...', context_lines=2)"
    else:
        if readers.read == _OWN_READ:
            read_call = f"{_OWN_READ}(path={ref}, offset={next_line}, limit=200)"
        elif readers.read:
            read_call = f"your {readers.read} tool on {reference} from line {next_line}"
        else:
            read_call = f"your file tools on {reference} from line {next_line}"
        read = read_call if next_line is not None else None
        if readers.grep == _OWN_GREP:
            search = f"{_OWN_GREP}(pattern='...', path_or_glob={ref})"
        elif readers.grep:
            search = f"your {readers.grep} tool on {reference}"
        elif readers.retrieve:
            search = f"{readers.retrieve}(reference={ref}, pattern='...', context_lines=2)"
        else:
            search = "your file tools"
    if read is None:
        return f"To search it, use {search}."
    return f"To read the rest, use {read}; to search it, use {search}."


def how_to_search(reference: str, readers: ReaderTools | None, *, compact: bool = False) -> str:
    """The words that tell the model how to search `reference` (a context log, one JSON
    message per line) with its reader tools: "search it with ...".

    Args:
        reference: the path (or other reference) of the log.
        readers: the agent's reader tools; None or empty for the generic wording.
        compact: the few-word form, where the reference is named right before and what to
            search for follows (a summary's header): a file tool by its name alone; the
            retrieval tool still with the reference it takes.
    """
    readers = readers or ReaderTools()
    if readers.grep == _OWN_GREP:
        if compact:
            return f"search it with {_OWN_GREP}"
        return (
            f"search it with {_OWN_GREP}(pattern='...', path_or_glob={reference!r}) and read the "
            "lines around a match"
        )
    if readers.grep or readers.read:
        return f"search or read it with your {readers.grep or readers.read} tool"
    if readers.retrieve:
        return f"search it with {readers.retrieve}(reference={reference!r}, pattern='...')"
    return "search it with your file tools"


def _compact(next_line: int | None, readers: ReaderTools) -> str:
    """A few words for a tight limit; the reference is named right before them."""
    if not (readers.read or readers.grep) and readers.retrieve:
        at = f" line_range=[{next_line}, ...]" if next_line is not None else ""
        return f"{readers.retrieve}{at} or pattern=..."
    if readers.read == _OWN_READ:
        read = f"Read offset={next_line}"
    elif readers.read:
        read = f"{readers.read} from line {next_line}"
    else:
        read = f"your file tools from line {next_line}"
    search = f"{readers.grep} it" if readers.grep else "search it"
    return f"{read}, or {search}" if next_line is not None else search
