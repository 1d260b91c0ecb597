"""One process of a resumed ADK session: `python google_adk_resume.py FOLDER DB FIRST LAST OUT`
runs turns FIRST..LAST-1 of the long chat in session "t" with its workspace in FOLDER and
ADK's sessions in the SQLite file DB (`SqliteSessionService`, what a deployed agent keeps its
sessions in), and writes what the model was sent on each request to OUT (JSON)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google_adk_scripted import Scripted, converse, runner_on, wire


def main(folder: str, db: str, first: int, last: int, out: str) -> None:
    model = Scripted()
    runner, _ = runner_on(Path(folder), model, sessions=SqliteSessionService(db))
    asyncio.run(converse(runner, model, range(first, last), "t"))
    Path(out).write_text(json.dumps([wire(request) for request in model.seen]))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
