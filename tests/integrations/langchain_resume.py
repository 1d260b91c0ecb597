"""One process of a resumed thread: `python langchain_resume.py DB FOLDER FIRST LAST OUT
[delta]` runs turns FIRST..LAST-1 of the long chat on thread "t", its checkpoints in the
SQLite file DB (with `delta`, its messages as deltas: `DeltaAgentState`) and its workspace in
FOLDER, and writes what the model was sent on each call to OUT (JSON)."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

from langchain_scripted import agent_on, answers, converse, scripted, wire
from langgraph.checkpoint.sqlite import SqliteSaver


def main(db: str, folder: str, first: int, last: int, out: str, delta: bool) -> None:
    model = scripted(*answers(last)[first:])
    with sqlite3.connect(db, check_same_thread=False) as connection:
        agent = agent_on(Path(folder), model, SqliteSaver(connection), delta=delta)
        converse(agent, range(first, last), "t")
    Path(out).write_text(json.dumps([wire(messages) for messages in model.seen]))


if __name__ == "__main__":
    args = sys.argv[1:]
    main(args[0], args[1], int(args[2]), int(args[3]), args[4], args[5:] == ["delta"])
