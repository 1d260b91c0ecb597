"""OffloadingStepCallbacks and the arguments a model writes, under a real smolagents agent
(offline, a subclass of smolagents' own `Model` answering from a script): a call that writes a
whole file, or a code agent's code holding one, is stored whole and cut to its head and a notice
in the step smolagents sends again, so every later call fits the window; the whole text comes
back byte for byte from the file the notice names; a small call is left as the model wrote it;
and the run's answer stays whole."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from frameworks import require_framework

require_framework("smolagents", "smolagents")

import pytest  # noqa: E402
from smolagents import CodeAgent, Tool, ToolCallingAgent  # noqa: E402
from smolagents.memory import ActionStep  # noqa: E402
from smolagents.models import ChatMessage, MessageRole  # noqa: E402
from smolagents_scripted import Scripted, answer, call, tokens  # noqa: E402

from ctxoffload import ContextConfig, LocalWorkspace  # noqa: E402
from ctxoffload.integrations.smolagents import OffloadingStepCallbacks  # noqa: E402

CONFIG = ContextConfig(context_window=8_000, tool_result_limit=300)
"""A small window: smolagents' own system prompt is 1,400 (tool calling) to 2,400 (code)
tokens of it."""

FILE = "".join(f"row {i}: export ok\n" for i in range(20_000))
"""What the model writes to a file: 408 KB, 160,000 tokens once in a call."""


class Write(Tool):  # type: ignore[misc]
    """A tool the model hands a whole file to; it keeps what it was given."""

    name = "write"
    description = "Write a file."
    inputs: ClassVar[dict[str, Any]] = {
        "path": {"type": "string", "description": "where"},
        "content": {"type": "string", "description": "the file's text"},
    }
    output_type = "string"

    def __init__(self) -> None:
        super().__init__()
        self.written: dict[str, str] = {}

    def forward(self, path: str, content: str) -> str:
        self.written[path] = content
        return f"wrote {len(content)} characters to {path}"


def agent_keeping_steps(
    model: Scripted,
    offload: OffloadingStepCallbacks,
    *tools: Any,
    kind: Any = ToolCallingAgent,
    **kwargs: Any,
) -> tuple[Any, list[Any]]:
    """An agent with the callbacks and their tools, and the list its action steps join as
    they end: a step the model has seen leaves the memory at a later compaction, and keeps
    there what the model was sent of it."""
    steps: list[Any] = []

    def ended(step: Any) -> None:
        steps.append(step)

    callbacks = dict(offload.step_callbacks)
    callbacks[ActionStep] = [*callbacks[ActionStep], ended]
    agent = kind(
        tools=[*tools, *offload.tools],
        model=model,
        step_callbacks=callbacks,
        verbosity_level=0,
        **kwargs,
    )
    return agent, steps


def named_file(text: str) -> Path:
    """The file a notice in `text` names."""
    found = re.search(r"is saved in:\n(\S+)", text)
    assert found is not None, text[-600:]
    return Path(found.group(1))


def test_a_call_that_writes_a_whole_file_is_cut_and_every_later_call_fits(
    tmp_path: Path,
) -> None:
    """smolagents sends each step again at every later call, its calls' arguments whole, and
    the newest step is never summarised: a 408 KB `write(content=...)` made every later call
    of the run 160,000 tokens against an 8,000-token window (ctxoffload only warned)."""
    offload = OffloadingStepCallbacks(LocalWorkspace(tmp_path / "ws"), config=CONFIG)
    model = Scripted(
        [
            call("write", {"path": "export.log", "content": FILE}, "c1"),
            call("write", {"path": "done.flag", "content": "x"}, "c2"),
            answer("written"),
        ]
    )
    write = Write()
    agent, steps = agent_keeping_steps(model, offload, write)
    assert agent.run("write the export log") == "written"
    assert write.written["export.log"] == FILE  # the tool was given the whole file
    assert [tokens(sent) < CONFIG.context_window for sent in model.seen] == [True] * 3
    step = steps[0]
    (cut,) = step.tool_calls
    assert cut.arguments["path"] == "export.log"  # the other argument as the model wrote it
    kept = cut.arguments["content"]
    assert kept.startswith("row 0: export ok\nrow 1: export ok\n") and len(kept) < 30_000
    # Stored whole first: the notice names the file, and so does what the next call was sent.
    stored = named_file(kept)
    assert stored.read_bytes() == FILE.encode()
    assert str(stored) in "".join(text for _, text in model.seen[1])
    # The model's message the step keeps holds the cut too (the host's state as lean).
    (wire,) = step.model_output_message.tool_calls
    assert wire.function.arguments["content"] == kept


def test_big_writes_in_a_row_leave_every_call_under_the_window(tmp_path: Path) -> None:
    """Six calls in a row, each writing a whole file: each step is cut to the newest turn's
    room, and the step before it, seen by the model, leaves whole at the next compaction
    (it stayed beside the newest, the reserve holding only its observation: 11,500 tokens a
    call against 8,000). Every file reached its tool whole and is in the session whole."""
    offload = OffloadingStepCallbacks(LocalWorkspace(tmp_path / "ws"), config=CONFIG)
    files = [FILE.replace("row", f"part {i} row") for i in range(6)]
    model = Scripted(
        [
            *(call("write", {"path": f"f{i}", "content": f}, f"c{i}") for i, f in enumerate(files)),
            answer("written"),
        ]
    )
    write = Write()
    agent, _ = agent_keeping_steps(model, offload, write, max_steps=10)
    assert agent.run("write six files") == "written"
    assert [tokens(sent) < CONFIG.context_window for sent in model.seen] == [True] * 7
    assert [write.written[f"f{i}"] for i in range(6)] == files
    session = offload.session_of(agent)
    assert session is not None
    folder = tmp_path / "ws" / "sessions" / session
    stored = {p.read_bytes() for p in folder.glob("tool_result-c*_content.*.txt")}
    assert stored == {f.encode() for f in files}


@pytest.mark.parametrize(
    ("line", "encoding"),
    [
        ("naïve café 🙂 שלום\t\x00 a\u2028b \udcff end\r\n", "surrogateescape"),
        ("half an emoji \ud83d from a JSON escape, \\n not a newline\r\n", "surrogatepass"),
    ],
    ids=["escaped-byte", "lone-surrogate"],
)
def test_odd_text_in_a_big_argument_comes_back_byte_for_byte(
    tmp_path: Path, line: str, encoding: str
) -> None:
    """An argument decoded from a model's JSON may hold anything: NUL, CRLF, U+2028, a byte
    escaped as a surrogate, half an emoji; the file holds it as the workspace writes any
    text, and it has no final newline."""
    content = line * 8_000 + "no final newline"
    offload = OffloadingStepCallbacks(LocalWorkspace(tmp_path / "ws"), config=CONFIG)
    model = Scripted([call("write", {"path": "odd", "content": content}, "c1"), answer("ok")])
    agent, steps = agent_keeping_steps(model, offload, Write())
    assert agent.run("write it") == "ok"
    assert tokens(model.seen[1]) < CONFIG.context_window
    stored = named_file(steps[0].tool_calls[0].arguments["content"])
    assert stored.read_bytes() == content.encode("utf-8", encoding)


def test_only_the_big_argument_of_a_step_is_cut(tmp_path: Path) -> None:
    """One step, two calls: the one that wrote a whole file is cut, the small one is left as
    the model wrote it (the same object), and nothing of it is stored."""
    offload = OffloadingStepCallbacks(LocalWorkspace(tmp_path / "ws"), config=CONFIG)
    both = call("write", {"path": "export.log", "content": FILE}, "c1")
    small = {"path": "done.flag", "content": "x"}
    both.tool_calls.append(call("write", small, "c2").tool_calls[0])
    model = Scripted([both, answer("written")])
    agent, steps = agent_keeping_steps(model, offload, Write())
    assert agent.run("write both") == "written"
    assert tokens(model.seen[1]) < CONFIG.context_window
    big_call, small_call = steps[0].tool_calls
    assert big_call.id == "c1" and len(big_call.arguments["content"]) < 30_000
    assert small_call.arguments is small
    session = offload.session_of(agent)
    assert session is not None
    stored = sorted(p.name for p in (tmp_path / "ws" / "sessions" / session).glob("*.txt"))
    assert [name for name in stored if "c2" in name] == []
    assert [name for name in stored if name.startswith("tool_result-c1")] != []


def test_a_big_final_answer_stays_the_run_s_answer_and_the_next_run_fits(
    tmp_path: Path,
) -> None:
    """`final_answer(answer=<408 KB>)`: `agent.run()` returns it whole (smolagents answers
    with the tool's output, not the step), and a run that goes on in the same memory
    (`reset=False`) is not sent it whole (it was: 160,000 tokens at its first call)."""
    offload = OffloadingStepCallbacks(LocalWorkspace(tmp_path / "ws"), config=CONFIG)
    model = Scripted([answer(FILE), answer("the export was 20,000 rows")])
    agent, steps = agent_keeping_steps(model, offload)
    assert agent.run("give me the export") == FILE
    final = steps[0]
    assert final.is_final_answer
    stored = named_file(final.tool_calls[0].arguments["answer"])
    assert stored.read_bytes() == FILE.encode()
    assert agent.run("how many rows?", reset=False) == "the export was 20,000 rows"
    assert tokens(model.seen[1]) < CONFIG.context_window


def test_a_code_agent_s_code_holding_a_whole_file_is_cut_in_both_places(tmp_path: Path) -> None:
    """A code agent's step sends its code twice, as the model's text and as the call's
    arguments: a snippet holding a 408 KB literal made the next call 340,000 tokens. Both
    are stored whole and cut; the snippet ran whole."""
    code = f"rows = {FILE!r}\nprint(len(rows))"
    said = f"Thought: keep the rows.\n<code>\n{code}\n</code>"
    replies = [
        ChatMessage(role=MessageRole.ASSISTANT, content=said),
        ChatMessage(role=MessageRole.ASSISTANT, content="<code>\nfinal_answer('kept')\n</code>"),
    ]
    offload = OffloadingStepCallbacks(LocalWorkspace(tmp_path / "ws"), config=CONFIG)
    model = Scripted(replies)
    agent, steps = agent_keeping_steps(model, offload, kind=CodeAgent)
    assert agent.run("keep the rows") == "kept"
    assert tokens(model.seen[1]) < CONFIG.context_window
    step = steps[0]
    assert f"{len(FILE)}" in step.observations  # it ran whole
    assert named_file(step.model_output).read_text(encoding="utf-8") == said
    (action,) = step.tool_calls
    assert named_file(action.arguments).read_text(encoding="utf-8") == code
    assert step.code_action == action.arguments
    assert step.model_output_message.content == step.model_output
