"""The proxy's own tools: the read-back tools every host gets (`reading_functions`, the one
list), served as MCP tools and confined to the proxy's workspace.

Each keeps its name (Read, Grep, Glob, `retrieve_offloaded_content`, and whatever the list
holds later) unless the wrapped server lists a tool of that name: the wrapped server's tool
keeps it (it is forwarded unchanged), and the proxy's is listed as `ctxoffload_<name>` (then
`ctxoffload_<name>_2`, ...). Truncation notices, and the hints the tools end an answer with,
name the tools under the names they are listed with.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from ..agent import Tool, as_tool
from ..compression import ReaderTools
from ..integrations import reading_functions
from ..messages import ToolCallBlock, ToolResultBlock
from ..workspace import Workspace

__all__ = ["PREFIX", "ReadingTools"]

_HINT = re.compile(r"\bcall ([A-Za-z_]+)\b")
"""A hint of a read-back tool naming a tool to call next."""

PREFIX = "ctxoffload_"
"""What a read-back tool's name gets in front when the wrapped server lists that name."""


class ReadingTools:
    """The read-back tools, under the names they are listed with.

    Args:
        workspace: the proxy's workspace (Read, Grep and Glob need it on a local folder).
        max_output_chars: longest answer of one tool.
        memory: serve the memory tool too (the one that writes, in `memories/`).
        session_id: the connection's session, where a memory change is recorded.
    """

    def __init__(
        self,
        workspace: Workspace,
        max_output_chars: int,
        *,
        memory: bool = False,
        session_id: str | None = None,
    ) -> None:
        self._tools: dict[str, Tool] = {}
        functions = reading_functions(
            workspace, max_output_chars, memory=memory, session_id=session_id
        )
        # What the list holds without the memory tool only reads; the rest writes.
        self._read_only = {as_tool(f).name for f in reading_functions(workspace, max_output_chars)}
        for function in functions:
            tool = as_tool(function)
            self._tools[tool.name] = tool
        self._listed = {name: name for name in self._tools}

    def rename_around(self, taken: Collection[str]) -> bool:
        """Name each tool so that none is among `taken` (the wrapped server's names).

        Returns:
            Whether any listed name changed.
        """
        taken = set(taken)
        listed: dict[str, str] = {}
        for name in self._tools:
            candidate = name if name not in taken else f"{PREFIX}{name}"
            count = 1
            while candidate in taken or candidate in listed.values():
                count += 1
                candidate = f"{PREFIX}{name}_{count}"
            listed[name] = candidate
        changed = listed != self._listed
        self._listed = listed
        return changed

    @property
    def names(self) -> list[str]:
        """The names the tools are listed with."""
        return list(self._listed.values())

    def owns(self, listed_name: str) -> bool:
        """Whether a call of `listed_name` is one of these tools'."""
        return listed_name in self._listed.values()

    @property
    def readers(self) -> ReaderTools:
        """The tools as truncation notices name them."""
        return ReaderTools.among(self._listed)

    def listing(self, types: Any) -> list[Any]:
        """The tools as MCP `Tool`s (closed-world; read-only but the memory tool)."""
        return [
            types.Tool(
                name=self._listed[name],
                description=tool.description,
                input_schema=tool.parameters,
                annotations=types.ToolAnnotations(
                    read_only_hint=name in self._read_only, open_world_hint=False
                ),
            )
            for name, tool in self._tools.items()
        ]

    async def call(
        self, listed_name: str, call_id: str, arguments: dict[str, Any]
    ) -> ToolResultBlock:
        """Run one tool; bad arguments and refusals are error results, never exceptions."""
        own = next(name for name, listed in self._listed.items() if listed == listed_name)
        tool = self._tools[own]
        answer = await tool.run(ToolCallBlock(id=call_id, name=listed_name, input=arguments))
        if isinstance(answer.output, str):
            answer = answer.model_copy(update={"output": self._hints_named(answer.output)})
        if isinstance(answer.output, str) and answer.output.startswith("Error:"):
            # A read-back tool says a refusal as text starting "Error:"; MCP says it with
            # `isError`, which clients show the model as a failed call.
            answer = answer.model_copy(update={"is_error": True})
        return answer

    def _hints_named(self, output: str) -> str:
        """`output` with each hint it ends with ("call Read with offset=41 to continue", "call
        Glob to find the right path") naming the tool as it is listed: under its own name it
        is the wrapped server's tool. Only a refusal (all of it) and the footer line after a
        window are hints; the lines of a file are left as they are."""
        renamed = {own: listed for own, listed in self._listed.items() if own != listed}
        if not renamed:
            return output

        def named(hint: str) -> str:
            return _HINT.sub(lambda m: f"call {renamed.get(m[1], m[1])}", hint)

        if output.startswith("Error:"):
            return named(output)
        head, newline, last = output.rpartition("\n")
        return f"{head}{newline}{named(last)}" if newline and last.startswith("… ") else output
