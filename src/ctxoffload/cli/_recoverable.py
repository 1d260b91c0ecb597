"""Whether everything that left a replayed context can be read back from what the context
still names: `ctxoffload replay`'s loss check.

A message that left is in the session's context.jsonl; text cut from a message or a tool
result is in a tool_result file the context names; a payload (an image) that left as a
reference into data/ is in that file, byte for byte. Files are read through the workspace:
its committed log (`read_context`), its references (`read_reference`), and data/ through
the reader (`Folder.sha256`), which `ctxoffload verify` hashes data/ files with too, so the
two cannot disagree about a data file.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from typing import TYPE_CHECKING, Any

from .._disk.layout import DATA_DIR, DATA_REFERENCE, TOOL_RESULT_PREFIX, TOOL_RESULT_SUFFIX
from .._disk.read import Folder

if TYPE_CHECKING:
    from ..workspace import LocalWorkspace

__all__ = ["check_recoverable", "data_kept"]

# A tool_result file named in a preview or a summary (the path ends at its suffix).
_FILE_REFERENCE = re.compile(
    rf"(\S+/{re.escape(TOOL_RESULT_PREFIX)}[^\s'\"<>]+?{re.escape(TOOL_RESULT_SUFFIX)})"
)


def data_kept(workdir: str, old: Any, new: Any) -> bool:
    """Whether a payload that left the context is in data/, byte for byte.

    Args:
        workdir: the workspace's folder.
        old: the `DataBlock` as the transcript had it.
        new: the block the context or its log holds now (a reference into data/), or None
            when none stands for it (a result cut to a preview): then any data/ file named
            by its sha256 will do.
    """
    from .._disk.payloads import decode_base64

    data = getattr(old.source, "data", None)
    if not isinstance(data, str):
        return False  # it named its bytes by a URL: only the same block keeps them
    try:
        digest = hashlib.sha256(decode_base64(data, what="the payload")).hexdigest()
    except ValueError:
        return False
    url = getattr(getattr(new, "source", None), "url", None)
    named = DATA_REFERENCE.findall(url) if isinstance(url, str) else []
    try:
        with Folder(workdir, DATA_DIR) as folder:
            names = named or [n for n in folder.names() if n.split(".", 1)[0] == digest]
            return any(folder.sha256(name) == digest for name in names)
    except OSError:  # no data/ folder, or the file is missing, refused or unreadable
        return False


class _ReadBack:
    """What one session's context names, read back (each file once)."""

    def __init__(self, workspace: LocalWorkspace) -> None:
        self.workspace = workspace
        self.workdir = str(workspace.workdir)
        self.files: dict[str, str] = {}

    async def _file(self, reference: str) -> str:
        if reference not in self.files:
            try:
                raw = await self.workspace.read_reference(reference)
                self.files[reference] = raw.decode("utf-8", "surrogateescape")
            except Exception:  # unknown, refused or unreadable: it holds nothing
                self.files[reference] = ""
        return self.files[reference]

    async def in_file(self, original: str, version: str) -> bool:
        """Whether `original` is in a tool_result file that `version` names."""
        for reference in _FILE_REFERENCE.findall(version):
            if original in await self._file(reference.strip("'\"(),")):
                return True
        return False

    async def data(self, old: Any, new: Any) -> bool:
        """`data_kept`, off the event loop."""
        return await asyncio.to_thread(data_kept, self.workdir, old, new)

    async def result(self, old: Any, new: Any) -> bool:
        """Whether a tool result the context changed can be read back whole."""
        from ..compression import rendered_text
        from ..messages import DataBlock, TextBlock

        def text_of(output: Any) -> str:
            if isinstance(output, str):
                return rendered_text(output)
            return "\n".join(p.text for p in output if isinstance(p, TextBlock))

        if (
            isinstance(old.output, list)
            and isinstance(new.output, list)
            and len(old.output) == len(new.output)
        ):
            # Item by item: a payload may have moved to data/ while the text stayed.
            for a, b in zip(old.output, new.output, strict=True):
                if a == b:
                    continue
                if isinstance(a, DataBlock) and isinstance(b, DataBlock):
                    if not await self.data(a, b):
                        return False
                elif not (
                    isinstance(a, TextBlock)
                    and isinstance(b, TextBlock)
                    and await self.in_file(a.text, b.text)
                ):
                    return False
            return True
        # Cut to a preview: its text is in the file the preview names, its payloads in data/.
        if not await self.in_file(text_of(old.output), text_of(new.output)):
            return False
        kept = new.output if isinstance(new.output, list) else []
        payloads = old.output if isinstance(old.output, list) else []
        for payload in payloads:
            moved = isinstance(payload, DataBlock) and payload not in kept
            if moved and not await self.data(payload, None):
                return False
        return True

    async def block_lost(self, msg: Any, old: Any, new: Any) -> str | None:
        """What of block `old` of message `msg` cannot be read back from `new`, or None."""
        from ..messages import DataBlock, TextBlock, ToolResultBlock

        if isinstance(old, ToolResultBlock) and isinstance(new, ToolResultBlock):
            if not await self.result(old, new):
                return f"tool result {old.id} of message {msg.id} is in no file"
        elif isinstance(old, TextBlock) and isinstance(new, TextBlock):
            if not await self.in_file(old.text, new.text):
                return f"text of message {msg.id} ({msg.role}) is in no file"
        elif isinstance(old, DataBlock) and isinstance(new, DataBlock):
            if not await self.data(old, new):
                return f"a data block of message {msg.id} is in no file"
        else:
            return f"a {old.type} block of message {msg.id} changed"
        return None


async def check_recoverable(
    originals: list[Any], live: list[Any], workspace: LocalWorkspace, session: str
) -> list[str]:
    """Which original messages (or parts) cannot be read back from what the context names.

    Args:
        originals: the transcript's messages, as replayed.
        live: the context at the end of the replay.
        workspace: the `LocalWorkspace` the replay wrote to.
        session: the session it wrote.

    Returns:
        One line for each message or block that is lost; none when everything is there.
    """
    from ..compression import is_summary_message
    from ..messages import Msg

    rows = {
        row.get("id"): row for row in await workspace.read_context(session) if isinstance(row, dict)
    }
    context_path = str(workspace.context_path(session))
    live_by_id = {m.id: m for m in live}
    lost: list[str] = []
    if rows and not any(is_summary_message(m) and context_path in m.text for m in live):
        lost.append(f"no message in the context names {context_path}")
    read_back = _ReadBack(workspace)
    for msg in originals:
        if msg.id in live_by_id:
            version = live_by_id[msg.id]
        elif msg.id in rows:
            version = Msg.model_validate(rows[msg.id])
        else:
            lost.append(
                f"message {msg.id} ({msg.role}) is neither in the context nor in {context_path}"
            )
            continue
        if version.content == msg.content:
            continue
        if len(msg.blocks) != len(version.blocks):
            if not await read_back.in_file(msg.text, version.text):
                lost.append(f"message {msg.id} ({msg.role}) changed and its text is in no file")
            continue
        for old, new in zip(msg.blocks, version.blocks, strict=True):
            if old != new:
                what = await read_back.block_lost(msg, old, new)
                if what is not None:
                    lost.append(what)
    return lost
