"""`written_whole`, the artifact index's one test of "this text names that value": a value is
named only where it is written whole, not as a piece of a longer value of its kind
(`/mnt/vol1` in `/mnt/vol10`), each kind bounded as the scan reads one."""

from __future__ import annotations

import pytest

from ctxoffload import ContextConfig, LocalWorkspace, Msg, ScriptedModel, get_token_counter
from ctxoffload.compression import Compressor
from ctxoffload.compression._index._artifact_index import ArtifactIndex
from ctxoffload.compression._index._artifacts import find_artifacts, message_artifacts
from ctxoffload.compression._index._whole import names_in
from helpers import summary_reply

CASES = [
    # paths: a letter, a digit or `_.-/@+~` beside one goes on with it
    ("path", "/mnt/vol1", "export written to /mnt/vol10", False),
    ("path", "/mnt/vol1", "df: /mnt/vol1 100% used", True),
    ("path", "/mnt/vol1", "df: /mnt/vol1: no space left", True),
    ("path", "/mnt/vol1", "the disk is /mnt/vol1.", True),
    ("path", "/mnt/vol1", "(/mnt/vol1)", True),
    ("path", "/mnt/vol1", "'/mnt/vol1'", True),
    ("path", "/mnt/vol1", "/mnt/vol1.bak", False),
    ("path", "/mnt/vol1", "/mnt/vol1-old", False),
    ("path", "/mnt/vol1", "/mnt/vol1_b", False),
    ("path", "/mnt/vol1", "/backup/mnt/vol1", False),
    ("path", "/mnt/vol1", "~/mnt/vol1", False),
    ("path", "src/a.py", "lib/src/a.py", False),
    ("path", "src/a.py", "./src/a.py", False),
    # ... but a `/` after one names it as the folder of what follows
    ("path", "/mnt/vol1", "/mnt/vol1/export.csv", True),
    ("path", "/mnt/vol1/", "/mnt/vol1/export.csv", True),
    # ids: a letter, a digit or `_` beside one goes on with it (the scan's `\b`)
    ("id", "E1234", "E12345", False),
    ("id", "E1234", "XE1234", False),
    ("id", "E1234", "E1234_b", False),
    ("id", "E1234", "logs/E1234.log", True),
    ("id", "ORD-582", "ORD-5821", False),
    ("id", "ORD-582", "see ORD-582, ORD-583", True),
    # URLs: anything but a blank or `<>"'`|()[]{}` goes on with one
    ("url", "https://x.io/a", "https://x.io/a?page=2", False),
    ("url", "https://x.io/a", "https://x.io/ab", False),
    ("url", "https://x.io/a", "https://x.io/a/b", False),
    ("url", "https://x.io/a", "<https://x.io/a>", True),
    ("url", "https://x.io/a", "at https://x.io/a.", True),
    ("url", "https://x.io/a", "xhttps://x.io/a", False),
    # commands: anything but a line's end, a quote, a backtick or an operator goes on
    ("command", "pytest -q", "pytest -q tests/unit", False),
    ("command", "pytest -q", "pytest -qx", False),
    ("command", "pytest -q", "ran `pytest -q`: 3 failed", True),
    ("command", "pytest -q", "$ pytest -q", True),
    ("command", "pytest -q", "pytest -q | tee log", True),
    ("command", "pytest -q", "cd app && pytest -q; ls", True),
    ("command", "pytest -q", "it said pytest -q.", True),
    ("command", "pytest -q", "run pytest -q, then ls", True),
    ("command", "pytest -q", "xpytest -q", False),
    ("command", "pytest -q", "/usr/bin/pytest -q", False),
]


@pytest.mark.parametrize(("kind", "value", "text", "named"), CASES)
def test_a_value_is_named_only_where_it_is_written_whole(
    kind: str, value: str, text: str, named: bool
) -> None:
    assert names_in(text, value, kind) is named


def test_a_value_cut_by_the_scan_is_named_where_its_kept_part_is_whatever_follows() -> None:
    """A command longer than 200 characters is kept as its first 200 and ` […]`: a text
    holding the whole command names it (what follows the 200 is the rest of it)."""
    command = "python -c '" + "x = 1; " * 60 + "'"
    [(kind, value)] = message_artifacts(Msg(role="user", content=f"```bash\n{command}\n```"))
    assert kind == "command" and value.endswith(" […]")
    assert names_in(f"ran {command} twice", value, kind)
    assert not names_in(f"ran x{command}", value, kind)


def test_each_value_the_scan_finds_is_named_by_the_text_it_was_found_in() -> None:
    """What the scan reads as a value is written whole where it read it: the rule and the
    scan agree on every kind, in running text."""
    text = (
        "ran `pytest -q tests/unit` on /srv/app/main.py and src/lib/x.py; see "
        "https://ci.example.com/jobs/9/log, ticket ORD-58213 (E1234), commit a1b2c3d4.\n"
        "$ make build"
    )
    found = message_artifacts(Msg(role="user", content=text))
    assert len(found) >= 7
    for kind, value in found:
        assert names_in(text, value, kind), (kind, value)


FILLER = " ".join(f"word{j}" for j in range(300))


@pytest.mark.parametrize("summary_names_vol10", [False, True])
async def test_a_path_inside_a_longer_one_is_indexed_at_the_line_that_holds_it(
    local_ws: LocalWorkspace, summary_names_vol10: bool
) -> None:
    """`/mnt/vol1` left with the line saying its disk is full, `/mnt/vol10` with another:
    whether the summary names `/mnt/vol10` or the index does, `/mnt/vol1` is not named by it
    (it was recorded as named by the summary, and its line named nowhere): the index names
    it at the line of context.jsonl that says the disk is full."""
    reply = summary_reply("gist")
    if summary_names_vol10:
        reply["important_discoveries"] = "the export to /mnt/vol10 finished"
    comp = Compressor(
        ContextConfig(context_window=8_000),
        model=ScriptedModel([], default=reply),
        offloader=local_ws,
        session_id="s1",
        counter=get_token_counter(exact=True),
    )
    context = [
        Msg(role="system", content="You are an operator."),
        Msg(role="user", content=f"check the volumes {FILLER}"),
        Msg(role="user", content=f"df: /mnt/vol1 100% used: No space left on device {FILLER}"),
        Msg(role="user", content=f"export written to /mnt/vol10 {FILLER}"),
        Msg(role="user", content=f"next {FILLER}"),
        Msg(role="user", content="now go"),
    ]
    result = await comp.maybe_compress(context, force=True)
    index = result.messages[1].text.partition("<artifact_index>")[2]
    [row] = [row for row in index.splitlines() if row.endswith(" /mnt/vol1")]
    line = int(row.removeprefix("- line ").partition(":")[0])
    lines = (local_ws.session_dir("s1") / "context.jsonl").read_text().splitlines()
    assert "No space left on device" in lines[line - 1]
    listed = [
        entry
        for event in await local_ws.read_events("s1")
        if event["kind"] == "artifacts"
        for entry in event["artifacts"]
    ]
    assert {e["value"]: e["status"] for e in listed}["/mnt/vol1"] == "index"


def test_values_nested_in_one_another_are_each_indexed_at_their_own_line() -> None:
    """Paths each a piece of the next (`/srv/v1`, `/srv/v11`, ...), ids (`E111`, `E1111`, ...),
    commands (`make`, `make x`, ...), each on a line of its own, the longest of each named by
    the summary, within a budget that holds them all: none is named by a longer one, so each
    other is an entry at its own line (a value in a longer one was taken as named by it, and
    its line named nowhere)."""
    paths = [f"/srv/v{'1' * n}" for n in range(1, 30)]
    ids = [f"E{'1' * n}" for n in range(3, 7)]
    commands = [" ".join(["make", *["x"] * n]) for n in range(10)]
    texts = [f"{v} is full" for v in paths] + [f"code {v} seen" for v in ids]
    texts += [f"```bash\n{v}\n```" for v in commands]
    msgs = [Msg(role="user", content=text) for text in texts]
    found, calls = find_artifacts(msgs, {m.id: n for n, m in enumerate(msgs, start=1)})
    assert len(found) == len(msgs)
    longest = {paths[-1], ids[-1], commands[-1]}
    index = ArtifactIndex.build(
        found,
        calls,
        summary_text=f"checked {paths[-1]} ({ids[-1]}) with `{commands[-1]}`",
        kept=[],
        counter=get_token_counter(exact=True),
        budget=10_000,
        events_file="/ws/sessions/s1/events.jsonl",
    )
    assert {f.value for f in index.in_summary} == longest and index.cut == []
    assert sorted((f.value, f.line) for f in index.entries) == sorted(
        (f.value, f.line) for f in found if f.value not in longest
    )
