"""One process of a resumed LlamaIndex conversation: `python llama_index_resume.py FOLDER DB
FIRST LAST OUT` runs turns FIRST..LAST-1 of the long chat in session "t" with its workspace in
FOLDER and LlamaIndex's chat store in the SQLite file DB (what a deployed agent keeps its
chats in), and writes what the model was sent on each call to OUT (JSON)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from llama_index_scripted import Scripted, chat_store, converse, memory_on, wire


async def main(folder: str, db: str, first: int, last: int, out: str) -> None:
    model = Scripted()
    memory = memory_on(Path(folder), "t", chat_store=chat_store(Path(db)))
    await converse(memory, model, range(first, last))
    await memory.aclose()
    Path(out).write_text(json.dumps([wire(messages) for messages in model.seen]))


if __name__ == "__main__":
    args = sys.argv
    asyncio.run(main(args[1], args[2], int(args[3]), int(args[4]), args[5]))
