"""`ctxoffload.eval.evaluate` with any ChatModel: the plan said before the first call, both
modes asked, tools run against the workspace, the budget of calls kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eval_session import DEMO_SESSION

from ctxoffload import Msg, ScriptedModel, ToolCallBlock
from ctxoffload.eval import evaluate, find_probes


async def test_a_scripted_model_is_asked_after_the_plan(demo_workdir: Path) -> None:
    plans: list[Any] = []
    asked_after_plan: list[bool] = []

    def reply(messages: Any) -> str:
        asked_after_plan.append(bool(plans))
        return "ORD-58213"

    model = ScriptedModel([reply] * 20)
    report = await evaluate(str(demo_workdir), DEMO_SESSION, model, on_plan=plans.append)
    (plan,) = plans
    assert (
        plan.probes == len(report.results) == len(find_probes(str(demo_workdir), DEMO_SESSION)[1])
    )
    assert all(asked_after_plan) and report.calls == len(asked_after_plan)
    by_category = {row["group"]: row for row in report.by_category()}
    assert by_category["id"]["no_tools"] == by_category["id"]["one_read"] == 1
    assert by_category["error"]["no_tools"] == 0


async def test_one_round_of_tool_calls_runs_against_the_workspace(demo_workdir: Path) -> None:
    stored = demo_workdir / "sessions" / DEMO_SESSION / "tool_result-call_2.txt"
    grep = Msg(
        role="assistant",
        content=[
            ToolCallBlock(
                id="g1", name="Grep", input={"pattern": "ERROR", "path_or_glob": str(stored)}
            )
        ],
    )
    seen: list[str] = []

    def answer(messages: Any) -> str:
        seen.append(messages[-1].tool_results[0].output)
        return seen[-1].split(":", 2)[2]

    _, probes = find_probes(str(demo_workdir), DEMO_SESSION)
    model = ScriptedModel(["no idea", grep, answer])
    report = await evaluate(str(demo_workdir), DEMO_SESSION, model, max_calls=3)
    (result,) = report.results
    assert result.probe.category == "error"
    assert "ORD-58213" in seen[0]
    assert result.one_read.read == [f'Grep({{"pattern": "ERROR", "path_or_glob": "{stored}"}})']
    assert result.one_read_correct and not result.no_tools_correct
    assert report.not_asked == probes[1:]
