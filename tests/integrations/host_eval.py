"""What the tests of `ctxoffload eval` through a door's model share: the deterministic reader
(tests/eval/reader.py), the demo's session to evaluate, the same evaluation asked of the
reader over HTTP as an `OpenAIChatModel`, and the comparison of the two (`asked_alike`)."""

from __future__ import annotations

import asyncio
import copy
import gc
import importlib.util
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from ctxoffload.agent import OpenAIChatModel
from ctxoffload.cli import main
from ctxoffload.eval import evaluate
from openai_server import OpenAIServer

DEMO_SESSION = "nightly-job"


def _reader() -> Any:
    path = Path(__file__).parents[1] / "eval" / "reader.py"
    spec = importlib.util.spec_from_file_location("eval_reader", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


READER = _reader()
"""tests/eval/reader.py: `answer_as_reader(body)`, a chat completion for a request body."""


def demo_workdir(root: Path) -> Path:
    """`ctxoffload demo --workdir <root>/d`: the session `DEMO_SESSION`, compacted 4 times."""
    workdir = root / "d"
    assert main(["demo", "--workdir", str(workdir)]) == 0
    return workdir


def seen(report: Any) -> list[tuple[Any, ...]]:
    """What each probe was answered, and how it was graded, in both modes."""
    return [
        (
            r.probe.question,
            *(r.no_tools.text, r.no_tools_correct),
            *(r.one_read.text, r.one_read.read, r.one_read_correct),
        )
        for r in report.results
    ]


ModelAt = Callable[[str], AbstractAsyncContextManager[Any]]
"""A model asked at an OpenAI-compatible base URL, held open while `async with` lasts
(`contextlib.nullcontext(model)` for one that keeps nothing to close)."""


OfferedAs = Callable[[str], str]
"""The name a host offers one of ctxoffload's tools by (`str`: its own; CrewAI's, sanitised)."""

READ_BACK = ("Read", "Grep")
"""The read-back tools eval offers the demo's session, in order."""


def reader_offered(offered_as: OfferedAs) -> Callable[[Any], Any]:
    """The reader as a model that calls a tool by the name it was offered: a host that offers
    `Read` as `offered_as("Read")` is answered with calls of that name."""
    if offered_as is str:
        return READER.answer_as_reader
    ours = {offered_as(name): name for name in READ_BACK}

    def answer(body: Any) -> Any:
        asked = copy.deepcopy(body)
        for tool in asked.get("tools") or []:
            tool["function"]["name"] = ours.get(tool["function"]["name"], tool["function"]["name"])
        said = READER.answer_as_reader(asked)
        for call in said["choices"][0]["message"].get("tool_calls") or []:
            call["function"]["name"] = offered_as(call["function"]["name"])
        return said

    return answer


def served(
    workdir: Path, model_at: ModelAt, offered_as: OfferedAs = str, *, by_id: bool = True
) -> tuple[Any, list[list[str]]]:
    """The demo session evaluated through `model_at(url)` with the reader served at the URL
    on 127.0.0.1 (`reader_offered(offered_as)`): the report, and the names of the tools each
    request offered. Each request's tool results answer calls made before them in it, and,
    `by_id` (a host that sends results as tool messages, not as text turns: smolagents),
    the reader's own calls came back answered, ids kept (`assert_results_answer_calls`)."""

    async def evaluated(base_url: str) -> Any:
        async with model_at(base_url) as model:
            return await evaluate(str(workdir), DEMO_SESSION, model)

    with OpenAIServer() as server:
        server.responder = reader_offered(offered_as)
        report = asyncio.run(evaluated(server.base_url))
        bodies = list(server.requests)
    assert_results_answer_calls(bodies, by_id=by_id)
    return report, [[t["function"]["name"] for t in body.get("tools") or []] for body in bodies]


def assert_results_answer_calls(bodies: list[Any], *, by_id: bool = True) -> None:
    """In each chat request of `bodies`, every tool message answers a call an assistant
    message before it made (OpenAI refuses a request where one does not), and, `by_id`, the
    reader's calls (id `read_1`) were answered by that id."""
    answered: set[str] = set()
    for body in bodies:
        made: set[str] = set()
        for message in body.get("messages") or []:
            made.update(str(call.get("id")) for call in message.get("tool_calls") or [])
            if message.get("role") == "tool":
                assert message.get("tool_call_id") in made, f"a result of no call: {message}"
                answered.add(str(message.get("tool_call_id")))
    assert "read_1" in answered or not by_id


def over_http(workdir: Path) -> Any:
    """The demo session evaluated by the reader served on 127.0.0.1, as `OpenAIChatModel`."""
    return served(workdir, lambda url: OpenAIChatModel("reader", base_url=url, api_key="test"))[0]


def assert_asked_alike(
    direct: Any, through: Any, offered: list[list[str]], offered_as: OfferedAs = str
) -> None:
    """`through` (a host's model) answered and read as `direct` (`over_http`), probe by probe;
    a probe only a read answers was answered by a read; the read mode's requests offered the
    read-back tools (by the names `offered_as` gives them), the others none."""
    assert through.results and seen(through) == seen(direct)
    assert read_only_by_reading(through)
    read_back = [offered_as(name) for name in READ_BACK]
    assert [] in offered and any(names[:2] == read_back for names in offered)


def asked_alike(
    root: Path, model_at: ModelAt, offered_as: OfferedAs = str, *, by_id: bool = True
) -> None:
    """The demo's session (made under `root`) evaluated through a host's model at the served
    reader (`model_at(url)`; a host that renames the tools it offers, by `offered_as`; one
    that sends a call's result as a text turn, not `by_id`) is asked as the same reader is
    as `OpenAIChatModel` (`assert_asked_alike`). What the host's client leaves to the
    collector is collected here, inside the caller's test, not in whichever test runs next."""
    workdir = demo_workdir(root)
    through, offered = served(workdir, model_at, offered_as, by_id=by_id)
    assert_asked_alike(over_http(workdir), through, offered, offered_as)
    gc.collect()


def read_only_by_reading(report: Any) -> bool:
    """Whether a probe the model missed with no tools was answered by one read."""
    return any(
        r.one_read.read and r.one_read_correct and not r.no_tools_correct for r in report.results
    )


def summary_asked_with_tools(model: Any) -> None:
    """Ask `model`, through its door's adapter (`chat_model_of`), for a summary shaped as the
    agent's last request (for its cache): one that carries the agent's tools (Read). The
    caller then checks the adapter asked it as before eval, with the summary's schema alone."""
    from ctxoffload import Msg, Summary
    from ctxoffload.integrations import chat_model_of

    read = {"type": "function", "function": {"name": "Read", "parameters": {"type": "object"}}}
    asyncio.run(
        chat_model_of(model).generate(
            [Msg(role="user", content="Summarise the conversation so far.")],
            tools=[read],
            response_schema=Summary.model_json_schema(),
        )
    )
