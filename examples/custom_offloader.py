"""A custom Offloader: send offloaded content anywhere, e.g. a database.

`Offloader` is a Protocol with three async methods; any object that has them can be passed
as `offloader=`. This one keeps everything in SQLite (standard library, a real file), and
is also a `ReferenceReader` (it has `read_reference`), so `retrieve_offloaded_content` and
the `retrieval_tool` an `Agent` registers for it can read content back for an agent that
has no file access.

The guides: docs/guides/agent.md ("Your own offloader") and docs/guides/reading-back.md.

Run:  python examples/custom_offloader.py
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxoffload import InvalidReference, Offloader, ToolResultBlock
from ctxoffload.readback import retrieve_offloaded_content
from ctxoffload.workspace import ReferenceReader


class SQLiteOffloader:
    """Offloaded messages and tool results as rows of one SQLite database."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path)
        self.db.execute("CREATE TABLE IF NOT EXISTS blobs (ref TEXT PRIMARY KEY, body BLOB)")
        self.db.execute("CREATE TABLE IF NOT EXISTS context (session TEXT, line TEXT)")

    async def offload_context(self, session_id: str, msgs: Sequence[Any]) -> str:
        rows = [(session_id, m.model_dump_json()) for m in msgs]
        with self.db:
            self.db.executemany("INSERT INTO context VALUES (?, ?)", rows)
        return f"sqlite://context/{session_id}"

    async def offload_tool_result(self, session_id: str, tool_result: Any) -> str:
        body = str(tool_result.output).encode()
        ref = f"sqlite://{session_id}/{hashlib.sha256(body).hexdigest()[:16]}"
        with self.db:
            self.db.execute("INSERT OR IGNORE INTO blobs VALUES (?, ?)", (ref, body))
        return ref

    async def offload_data_block(self, block: Any) -> Any:
        return block  # images stay inline in this example

    async def read_reference(self, reference: str) -> bytes:
        row = self.db.execute("SELECT body FROM blobs WHERE ref = ?", (reference,)).fetchone()
        if row is None:
            # The protocol's error: the retrieval tool answers it as text the model can read.
            raise InvalidReference(f"no offloaded content is stored as {reference!r}")
        return bytes(row[0])


async def main() -> None:
    # A temporary folder for the database, removed with everything in it at the end.
    with tempfile.TemporaryDirectory(prefix="ctxoffload-") as folder:
        path = str(Path(folder) / "offload.db")
        offloader = SQLiteOffloader(path)
        assert isinstance(offloader, Offloader)  # the protocols are runtime-checkable
        assert isinstance(offloader, ReferenceReader)
        try:
            output = "\n".join(f"row {i}: ok" for i in range(10_000))
            output += "\nrow 10000: FAILED checksum"
            block = ToolResultBlock(id="c1", output=output)
            ref = await offloader.offload_tool_result("s1", block)
            print("stored as", ref)
            print(
                await retrieve_offloaded_content(offloader, ref, pattern="FAILED", context_lines=1)
            )
            (rows,) = offloader.db.execute("SELECT COUNT(*) FROM blobs").fetchone()
            print(json.dumps({"path": path, "rows": rows}))
        finally:
            offloader.db.close()


if __name__ == "__main__":
    asyncio.run(main())
