"""One process of a resumed run: `python pydantic_ai_resume.py FOLDER FIRST LAST HISTORY OUT`
runs turns FIRST..LAST-1 of the long chat on conversation "t" with its workspace in FOLDER,
given the history in the JSON file HISTORY (when it exists) and leaving the new history
there, and writes what the model was sent on each request to OUT (JSON)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai_scripted import Scripted, agent_on, converse, wire


def main(folder: str, first: int, last: int, history: str, out: str) -> None:
    saved = Path(history)
    given = ModelMessagesTypeAdapter.validate_json(saved.read_bytes()) if saved.exists() else []
    model = Scripted()
    turns = range(first, last)
    messages = asyncio.run(converse(agent_on(Path(folder), model), model, turns, "t", given))
    saved.write_bytes(ModelMessagesTypeAdapter.dump_json(messages))
    Path(out).write_text(json.dumps([wire(request) for request in model.seen]))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
