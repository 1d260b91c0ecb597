"""One contract for every door (DESIGN.md section 17, docs/guides/hosts.md), held against each
door's real host through its driver (`contract.py`, `contract_<door>.py`).

`.ci/run` runs this module in each host's environment with that host required, and in the
main one for the doors that need no host package; a door's host that is missing elsewhere is
skipped with the install line. A door that cannot keep a promise says which and why in its
driver's `reasons`: its skip line here quotes it.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from contract import (
    BIG,
    MEDIUM,
    NEEDLE,
    STORES,
    DoorDriver,
    Outcome,
    Turn,
    dense,
    drivers,
    files_holding,
    known_gap,
    readers_named,
    reading_notices,
    skip_unless,
    skip_where_it_runs_elsewhere,
)

from ctxoffload import ConfigError, LocalWorkspace, SessionBusyError
from ctxoffload._disk.ids import session_id_for
from ctxoffload._doors.doors import DOORS

DRIVERS = drivers()


def ids(driver: DoorDriver) -> str:
    return driver.door


doors = pytest.mark.parametrize("driver", DRIVERS, ids=ids)


@pytest.fixture(autouse=True)
def _once_in_its_own_environment(request: pytest.FixtureRequest) -> None:
    callspec = getattr(request.node, "callspec", None)
    driver = callspec.params.get("driver") if callspec is not None else None
    if isinstance(driver, DoorDriver):
        skip_where_it_runs_elsewhere(driver)


def ctxoffload(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """The `ctxoffload` command, as a person runs it in a pipe (no $COLUMNS: a host's run in
    this process may leave one set, which would fold what the command prints)."""
    env = {name: value for name, value in os.environ.items() if name != "COLUMNS"}
    return subprocess.run(
        [sys.executable, "-m", "ctxoffload", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
    )


def events_of(workdir: Path, session: str) -> list[dict[str, object]]:
    path = workdir / "sessions" / session / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# -- identity ------------------------------------------------------------------------------------


@doors
def test_each_conversation_is_a_session_of_its_own_named_by_the_one_rule(
    driver: DoorDriver, tmp_path: Path
) -> None:
    skip_unless(driver, "identity")
    workspace = LocalWorkspace(tmp_path / "ws")
    made = driver.make(workspace)
    hostile = "team/alice:42"
    shaped = session_id_for(hostile)  # a name someone else may pass as it is
    sessions = [
        driver.converse(made, conversation, [Turn("hello", tool_output=MEDIUM)]).session
        for conversation in ("c1", hostile, shaped)
    ]
    # A plain name is its own session (through a door whose host's id is the conversation's
    # name), any other id its mapped name, and a name shaped like that another session.
    assert sessions == [driver.session_of(c) for c in ("c1", hostile, shaped)]
    if driver.host_id("c1") == "c1":
        assert sessions[:2] == ["c1", shaped]
    assert len(set(sessions)) == 3
    assert set(sessions) <= {p.name for p in (tmp_path / "ws" / "sessions").iterdir()}


@doors
def test_conversations_the_host_names_no_way_never_share_a_session(
    driver: DoorDriver, tmp_path: Path
) -> None:
    skip_unless(driver, "no shared default")
    made = driver.make(LocalWorkspace(tmp_path / "ws"))  # one door, two conversations
    first = driver.converse(made, None, [Turn("hello", tool_output=MEDIUM)]).session
    second = driver.converse(made, None, [Turn("hi", tool_output=MEDIUM)]).session
    assert first != second
    assert driver.door not in (first, second)  # never the door's name as a default


@doors
def test_the_door_names_the_session_its_last_run_wrote(driver: DoorDriver, tmp_path: Path) -> None:
    """Where a run given no id of its own went, asked of the door object (`last_session`),
    not found by listing the workspace (issue 83, item 10)."""
    if not driver.door_object:
        pytest.skip(f"{driver.door} has no door object that runs go through to ask")
    skip_unless(driver, "no shared default")
    made = driver.make(LocalWorkspace(tmp_path / "ws"))
    door = getattr(made, driver.door_object)
    assert door.last_session is None
    first = driver.converse(made, None, [Turn("hello", tool_output=MEDIUM)]).session
    assert door.last_session == first
    second = driver.converse(made, None, [Turn("hi", tool_output=MEDIUM)]).session
    assert door.last_session == second != first


# -- one writer ----------------------------------------------------------------------------------


@doors
def test_a_second_live_run_of_a_conversation_is_refused_in_the_hosts_terms(
    driver: DoorDriver, tmp_path: Path
) -> None:
    skip_unless(driver, "one writer")
    door = DOORS[driver.door]
    workspace = LocalWorkspace(tmp_path / "ws")
    with driver.live_run(workspace, "shared"), pytest.raises(SessionBusyError) as refused:
        driver.converse(driver.make(LocalWorkspace(tmp_path / "ws")), "shared", [Turn("hi")])
    message = str(refused.value)
    assert door.busy.lower() in message.lower()
    if driver.door != "agent":
        assert "if_busy" not in message  # the Agent's advice, which no host has
    # The first run went on (live_run checks it finished); a run after it is welcome.
    after = driver.converse(driver.make(LocalWorkspace(tmp_path / "ws")), "shared", [Turn("x")])
    assert after.session == driver.session_of("shared")


# -- checked at construction ---------------------------------------------------------------------


@doors
def test_a_path_where_a_workspace_belongs_is_refused_at_construction(driver: DoorDriver) -> None:
    skip_unless(driver, "checked at construction")
    skip_unless(driver, "a path is no workspace")
    with pytest.raises(ConfigError, match=r"LocalWorkspace\('agent_workspace'\)"):
        driver.make("agent_workspace")


@doors
@pytest.mark.parametrize(
    ("url", "backend"),
    [
        ("postgresql://agent:S3cr3t-pw@db:5432/agents", "SqlWorkspace"),
        ("sqlite:///agents.db?password=S3cr3t-pw", "SqlWorkspace"),
        ("s3://S3cr3t-pw@bucket/prefix", "ObjectStoreWorkspace"),
    ],
)
def test_a_url_where_a_workspace_belongs_is_refused_masked_naming_its_backend(
    driver: DoorDriver, url: str, backend: str
) -> None:
    skip_unless(driver, "checked at construction")
    skip_unless(driver, "a path is no workspace")
    with pytest.raises(ConfigError) as refused:
        driver.make(url)
    message = str(refused.value)
    assert "S3cr3t" not in message
    assert f"pass {backend}(" in message
    assert "LocalWorkspace(" not in message


@doors
def test_a_workdir_that_is_a_file_is_refused_at_construction(
    driver: DoorDriver, tmp_path: Path
) -> None:
    skip_unless(driver, "checked at construction")
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        driver.make(LocalWorkspace(afile))
    assert afile.read_text() == "not a folder"


class NoFrameworksModel:
    """A model of no framework: a name and a sync `generate`, which no door can ask."""

    model_name = "homemade"

    def generate(self, messages: object) -> str:
        return "{}"


summarizing = pytest.mark.parametrize(
    "driver", [driver for driver in DRIVERS if DOORS[driver.door].summaries], ids=ids
)


@summarizing
@pytest.mark.parametrize(
    "given", [42, True, NoFrameworksModel()], ids=["a number", "True", "no framework's model"]
)
def test_a_summary_model_the_door_cannot_ask_is_refused_at_construction_naming_the_opt_out(
    driver: DoorDriver, given: object, tmp_path: Path
) -> None:
    """Every door that writes summaries keeps one rule (DESIGN section 18): its host's model
    or a ctxoffload ChatModel writes them, the agent's own by default, `summary_model=False`
    keeps the extract, and anything else is refused when the door is built, never at the
    first compaction deep in a run."""
    skip_unless(driver, "checked at construction")
    with pytest.raises(ConfigError) as refused:
        driver.make_summarizing(LocalWorkspace(tmp_path / "ws"), given)
    assert "summary_model=False" in str(refused.value)


@summarizing
def test_summary_model_false_is_the_extract_taken_at_construction(
    driver: DoorDriver, tmp_path: Path
) -> None:
    skip_unless(driver, "checked at construction")
    assert driver.make_summarizing(LocalWorkspace(tmp_path / "ws"), False) is not None


ADAPTER_MODULES = {
    "agent": "ctxoffload",
    "claude-agent-sdk": "ctxoffload.integrations.claude",
    "strands-storage": "ctxoffload.integrations.strands",
}
"""Where a door's adapter class is, for a door whose module is not named for it."""


@doors
def test_a_keyword_the_door_does_not_take_is_a_config_error_naming_the_fix(
    driver: DoorDriver,
) -> None:
    """`ContextOffloadPlugin(ws, tool_result_limit=3000)` was Python's bare TypeError where
    a config dict gets a ConfigError naming `ContextConfig(...)`: every door's class refuses
    a keyword it does not take the same way (issue 83, item 11)."""
    skip_unless(driver, "checked at construction")
    door = DOORS[driver.door]
    if door.adapter.startswith("ctxoffload "):
        pytest.skip(f"{driver.door} is a command: its options are refused by its usage line")
    name = driver.door.replace("-", "_")
    module = importlib.import_module(
        ADAPTER_MODULES.get(driver.door, f"ctxoffload.integrations.{name}")
    )
    adapter = getattr(module, door.adapter)
    config = [p for p in inspect.signature(adapter).parameters if p.endswith("config")]
    with pytest.raises(ConfigError) as refused:
        adapter(tool_result_limit=3000)
    if config:
        assert f"pass {config[0]}=ContextConfig(tool_result_limit=3000)" in str(refused.value)
    else:
        assert f"{door.adapter} takes no argument 'tool_result_limit'" in str(refused.value)
    with pytest.raises(ConfigError, match=f"{door.adapter} takes no argument 'bogus': it takes "):
        adapter(bogus=1)


# -- stored once, whole --------------------------------------------------------------------------


def stored_whole_once(driver: DoorDriver, tmp_path: Path, output: str) -> Outcome:
    """Play one turn whose tool gives `output`; check that one tool_result file holds it
    whole and that what the host keeps names that file. The conversation's outcome."""
    made = driver.make(LocalWorkspace(tmp_path / "ws"))
    outcome = driver.converse(made, "stored", [Turn("fetch it", tool_output=output)])
    whole = driver.as_the_host_gives(output)
    holding = files_holding(tmp_path / "ws", whole)
    assert len(holding) == 1, holding
    assert holding[0].name.startswith("tool_result-")
    assert holding[0].read_text() == whole
    assert whole not in outcome.kept
    assert (outcome.names or holding[0].name) in outcome.kept
    return outcome


@doors
def test_a_big_output_is_stored_whole_once_and_the_host_keeps_its_head(
    driver: DoorDriver, tmp_path: Path
) -> None:
    skip_unless(driver, "stored once")
    outcome = stored_whole_once(driver, tmp_path, BIG)
    assert len(outcome.kept) < len(BIG) // 50
    for sent in outcome.sent:
        assert sum(map(len, sent)) < len(BIG) // 10  # no request carries it


@doors
def test_an_output_over_the_limit_in_tokens_not_in_characters_is_stored_whole_too(
    driver: DoorDriver, tmp_path: Path
) -> None:
    """Tokens are not characters: an output shorter than the door's limit in characters but
    nearly three times over it in tokens is stored whole and the host keeps its head, as a
    long one is (each door once let it through whole, taking a token for a character)."""
    skip_unless(driver, "stored once")
    skip_unless(driver, "tokens, not characters")
    output = dense(driver.limit)
    assert len(output) < driver.limit
    stored_whole_once(driver, tmp_path, output)


NOTE = "".join(f"draft {i}: the export keeps its order\n" for i in range(50_000))
"""What a model writes as a call's argument (~1.9 MB, ~550,000 tokens: a file it writes
whole), over every door's window."""


@doors
def test_a_big_argument_the_model_wrote_is_stored_whole_and_not_sent_again_whole(
    driver: DoorDriver, tmp_path: Path
) -> None:
    """A call's arguments are the model's output, sent again with every later request of the
    conversation: a door cuts a big one as it cuts a big tool output (stored whole first,
    head and notice kept), or every later request is over the window (smolagents' door sent
    160,000 tokens a call against 8,000 after a 408 KB `write(content=...)`)."""
    skip_unless(driver, "call arguments")
    with known_gap(driver, "call arguments"):
        workdir = tmp_path / "ws"
        made = driver.make(LocalWorkspace(workdir))
        turns = [Turn("write the draft", tool_output="written", note=NOTE), Turn("and now?")]
        outcome = driver.converse(made, "c1", turns)
        head, tail = NOTE.splitlines()[0], NOTE.splitlines()[-1]
        after = ["\n".join(sent) for sent in outcome.sent[1:]]
        assert after, "the door saw no request after the call"
        assert head in after[0]  # the call is still sent (what this checks is its arguments' size)
        for request in after:
            assert tail not in request, "a request after the call carries its argument whole"
            assert len(request) < len(NOTE) // 2
        assert files_holding(workdir, NOTE.rstrip("\n")), "the argument is stored whole nowhere"


# -- recorded ------------------------------------------------------------------------------------


@doors
def test_show_opens_the_session_with_what_its_door_records(
    driver: DoorDriver, tmp_path: Path
) -> None:
    skip_unless(driver, "recorded")
    made = driver.make(LocalWorkspace(tmp_path / "ws"))
    outcome = driver.converse(made, "shown", [Turn("dump the log", tool_output=BIG)])
    shown = ctxoffload("show", outcome.session, "--workdir", tmp_path / "ws")
    assert shown.returncode == 0, shown.stderr
    first, then = shown.stdout.splitlines()[1:3]
    if driver.door == "agent":
        assert "session started" in first
    else:
        assert DOORS[driver.door].host in first and "it records" in then
    if DOORS[driver.door].steps:  # every model call the door saw is rebuilt
        step = ctxoffload("show", outcome.session, "--step", "1", "--workdir", tmp_path / "ws")
        assert step.returncode == 0, step.stderr


CONVERSATION = "5f0c2b8e-8d4e-4f55-9d8e-2a7c1b9f3e61"
"""A conversation named as most hosts name one (a uuid; ADK's is an app and a user too)."""


def printed_at_80(*args: str | Path) -> list[str]:
    """The lines of `ctxoffload ARGS` on a terminal of 80 columns (`$COLUMNS`)."""
    env = {**os.environ, "COLUMNS": "80"}
    done = subprocess.run(
        [sys.executable, "-m", "ctxoffload", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@doors
def test_show_ls_and_stats_fit_80_columns_and_never_break_an_id(
    driver: DoorDriver, tmp_path: Path
) -> None:
    """A session of every door reads at 80 columns: `show`'s lines fold at their spaces (only
    the folder's path, as long as the temporary folder makes it, may be wider), and the
    tables shorten a long id in its middle, `HEAD…TAIL`, which `show` takes: an id is never
    broken onto two lines (issue 83, item 1)."""
    skip_unless(driver, "recorded")
    workdir = tmp_path / "ws"
    made = driver.make(LocalWorkspace(workdir))
    turns = [Turn("dump the log", tool_output=BIG), Turn("thanks")]
    session = driver.converse(made, CONVERSATION, turns).session
    shown = printed_at_80("show", session, "--workdir", workdir)
    assert shown[0] in (
        f"session {session}",
        f"session {session} ({workdir / 'sessions' / session})",
    )
    wide = [
        line
        for line in shown
        if len(line) > 80 and line != f"  in {workdir / 'sessions' / session}"
    ]
    assert wide == [], "\n".join(shown)
    for command in ("ls", "stats"):
        lines = printed_at_80(command, "--workdir", workdir)
        assert max(map(len, lines)) <= 80, "\n".join(lines)
        # The session's row: the first line under the headers (which may fold) not indented.
        cell = next(line.split()[0] for line in lines[1:] if not line.startswith(" "))
        if cell != session:
            head, _, tail = cell.partition("…")
            assert tail and session.startswith(head) and session.endswith(tail), "\n".join(lines)
            assert printed_at_80("show", cell, "--workdir", workdir)[0].split()[1] == session


# -- compaction from outside ---------------------------------------------------------------------


@doors
def test_compact_from_outside_is_served_or_refused_at_once(
    driver: DoorDriver, tmp_path: Path
) -> None:
    skip_unless(driver, "compact from outside")
    workdir = tmp_path / "ws"
    made = driver.make(LocalWorkspace(workdir))
    turns = [Turn(f"question {i} " * 40, tool_output=MEDIUM if i == 0 else None) for i in range(6)]
    session = driver.converse(made, "long", turns).session
    before = (workdir / "sessions" / session / "events.jsonl").read_bytes()
    asked = ctxoffload("compact", session, "--wait", "0", "--workdir", workdir)
    if not DOORS[driver.door].projects:
        assert asked.returncode == 2
        assert len(asked.stderr.strip().splitlines()) == 1
        assert "cannot compact it" in asked.stderr
        assert (workdir / "sessions" / session / "events.jsonl").read_bytes() == before
        return
    assert asked.returncode in (0, 3), asked.stderr  # served here, or pending for the host
    driver.converse(made, "long", [Turn("go on")])
    kinds = [e["kind"] for e in events_of(workdir, session)]
    assert "compact_request" in kinds and kinds.index("compact") > kinds.index("compact_request")


# -- resume -------------------------------------------------------------------------------------


@doors
def test_a_resumed_conversation_sends_what_an_unbroken_one_sends(
    driver: DoorDriver, tmp_path: Path
) -> None:
    skip_unless(driver, "resume")
    if not DOORS[driver.door].steps:
        pytest.skip(f"{driver.door} sees no model call: its host decides what the model is sent")
    turns = [
        Turn(f"question {i} " * 40, tool_output=MEDIUM if i % 3 == 0 else None) for i in range(12)
    ]
    # A request too long to stay whole when the context is compacted, sent cut from then on.
    turns[8] = Turn("question 8 " + "and one more detail " * 150)
    unbroken = driver.converse(driver.make(LocalWorkspace(tmp_path / "a")), "r", turns).sent
    made = driver.make(LocalWorkspace(tmp_path / "b"))
    driver.converse(made, "r", turns[:-3])
    # A new door object on a new workspace object, as a restarted process builds them.
    again = driver.reopen(made, LocalWorkspace(tmp_path / "b"))
    resumed = driver.converse(again, "r", turns[-3:]).sent
    assert len(unbroken) > len(resumed) >= 1
    assert any(len(b) < len(a) for a, b in itertools.pairwise(unbroken)), (
        "nothing was ever compacted: the conversation is too short to test a resume"
    )

    def neutral(sent: list[str], folder: Path) -> list[str]:
        return [
            text.replace(str(folder.resolve()), "WS").replace(str(folder), "WS") for text in sent
        ]

    # Every call after the resume is the unbroken run's, byte for byte: the decisions made
    # before it (the summaries and cuts read back from the session) applied again, and those
    # made after it made from what the unbroken run knew (the files stored, what was sent).
    first_resumed = len(unbroken) - len(resumed)
    for at, (call, theirs) in enumerate(zip(resumed, unbroken[first_resumed:], strict=True)):
        assert neutral(call, tmp_path / "b") == neutral(theirs, tmp_path / "a"), (
            f"call {at + 1} after the resume differs"
        )


# -- same tools, same answers --------------------------------------------------------------------


@doors
def test_grep_answers_the_same_through_every_door(driver: DoorDriver, tmp_path: Path) -> None:
    skip_unless(driver, "same tools")
    made = driver.make(LocalWorkspace(tmp_path / "ws"))
    outcome = driver.converse(made, "tools", [Turn("dump the log", tool_output=BIG)])
    answer = driver.grep(made, "tools", NEEDLE)
    (stored,) = files_holding(tmp_path / "ws", driver.as_the_host_gives(BIG))
    assert f"{stored}:" in answer or stored.name in answer
    assert NEEDLE in answer
    assert "events.jsonl" not in answer and "state.json" not in answer
    assert outcome.session


@doors
@pytest.mark.parametrize("store", sorted(STORES))
def test_every_notice_names_only_reader_tools_the_model_was_given(
    driver: DoorDriver, store: str, tmp_path: Path
) -> None:
    """What a cut result's notice, a placeholder or a summary's header tells the model to call
    is a tool it has: on a folder the file tools the door gave, on a store with none (memory,
    a bucket, a database) the retrieval tool (four doors gave `retrieve_offloaded_content`
    and said "use your file tools on memory://.../tool_result-c1.txt from line 11")."""
    skip_unless(driver, "readers named")
    skip_unless(driver, f"readers named on a {store}")
    turns = [
        Turn(f"question {i} " * 40, tool_output=MEDIUM if i % 3 == 0 else None) for i in range(12)
    ]
    with known_gap(driver, f"readers named on a {store}"):
        outcome = driver.converse(driver.make(STORES[store](tmp_path)), "readers", turns)
        given = {*outcome.tools, *(driver.host_readers if store == "folder" else ())}
        texts = [*(text for sent in outcome.sent for text in sent), outcome.kept]
        notices = [notice for text in texts for notice in reading_notices(text)]
        assert notices, "nothing was cut or compacted: no notice to hold"
        for notice in notices:
            named = readers_named(notice, given)
            assert named, f"a notice names no tool to read it back: {notice[:600]}"
            assert named <= given, f"names {named - given}, not given ({given}): {notice[:600]}"
        for text in texts:
            named = readers_named(text, given)
            assert named <= given, f"names {named - given}, not given ({given}): {text[:600]}"
