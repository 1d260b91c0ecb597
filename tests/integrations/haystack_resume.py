"""One run of the resumed-conversation test (tests/integrations/test_haystack_store.py), in a
process of its own: a Haystack Agent with WorkspaceResultStore and WorkspaceCompactor on
`folder`, given the messages saved in `saved` (if it exists), takes `count` readings from
`first` on, saves the messages back and writes what each call was sent to `sent`; with
`then`, it goes on in the same process (the same agent, store and compactor) for `then`
readings more, and `sent` holds that second run's calls.

Usage: python haystack_resume.py FOLDER SAVED SENT FIRST COUNT [THEN]
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

from haystack.dataclasses import ChatMessage
from haystack.hooks.compaction import CompactionHook
from haystack_scripted import Scripted, agent_with, call, returning, say

from ctxoffload import LocalWorkspace
from ctxoffload.integrations.haystack import WorkspaceCompactor, WorkspaceResultStore


def reading(i: int) -> str:
    return f"reading {i} of the export: " + f"gauge {i * 7} nominal, " * 60


def main(folder: Path, saved: Path, sent: Path, first: int, count: int, then: int) -> None:
    store = WorkspaceResultStore(LocalWorkspace(folder), session_id="resumed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Haystack marks CompactionHook experimental
        hook = CompactionHook(WorkspaceCompactor(store), context_window=8_000)
    total = count + then
    readings = [reading(i) for i in range(first, first + total)]
    model = Scripted()
    agent = agent_with(model, [returning("fetch", readings), *store.tools], {"before_llm": [hook]})
    history = []
    if saved.exists():
        history = [ChatMessage.from_dict(d) for d in json.loads(saved.read_text())]
    for start, size in ((first, count), (first + count, then)):
        if size == 0:
            continue
        model.replies = iter(
            [*(call("fetch", {}, f"call_{i}") for i in range(start, start + size)), say("Taken.")]
        )
        model.seen.clear()
        ask = ChatMessage.from_user(f"Take {size} readings from {start}.")
        history = agent.run([*history, ask])["messages"]
    saved.write_text(json.dumps([m.to_dict() for m in history]))
    sent.write_text(json.dumps(model.seen))


if __name__ == "__main__":
    folder, saved, sent, first, count = sys.argv[1:6]
    then = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    main(Path(folder), Path(saved), Path(sent), int(first), int(count), then)
