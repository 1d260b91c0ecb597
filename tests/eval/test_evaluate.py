"""`ctxoffload.eval.evaluate` with any ChatModel: the plan said before the first call, both
modes asked, tools run against the workspace, the budget of calls kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from eval_session import DEMO_SESSION

from ctxoffload import Msg, ScriptedModel, ToolCallBlock
from ctxoffload.eval import evaluate
from ctxoffload.eval._probes import Probe


async def _probes(workdir: Path) -> list[Probe]:
    return (await evaluate(str(workdir), DEMO_SESSION)).not_asked


@pytest.mark.slow
async def test_a_scripted_model_is_asked_after_the_plan(demo_workdir: Path) -> None:
    plans: list[Any] = []
    asked_after_plan: list[bool] = []

    def reply(messages: Any) -> str:
        asked_after_plan.append(bool(plans))
        return "ORD-58213"

    model = ScriptedModel([reply] * 20)
    report = await evaluate(str(demo_workdir), DEMO_SESSION, model, on_plan=plans.append)
    (plan,) = plans
    assert plan.probes == len(report.results) == len(await _probes(demo_workdir))
    assert all(asked_after_plan) and report.calls == len(asked_after_plan)
    by_category = {row["group"]: row for row in report.by_category()}
    assert by_category["id"]["no_tools"] == by_category["id"]["one_read"] == 1
    assert by_category["error"]["no_tools"] == 0


@pytest.mark.slow
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

    probes = await _probes(demo_workdir)
    model = ScriptedModel(["no idea", grep, answer])
    report = await evaluate(str(demo_workdir), DEMO_SESSION, model, max_calls=3)
    (result,) = report.results
    assert result.probe.category == "error"
    assert "ORD-58213" in seen[0]
    assert result.one_read.read == [f'Grep({{"pattern": "ERROR", "path_or_glob": "{stored}"}})']
    assert result.one_read_correct and not result.no_tools_correct
    assert report.not_asked == probes[1:]


@pytest.mark.slow
async def test_with_no_model_nothing_is_asked_and_every_probe_is_planned(
    demo_workdir: Path,
) -> None:
    plans: list[Any] = []
    report = await evaluate(str(demo_workdir), DEMO_SESSION, on_plan=plans.append)
    assert report.results == [] and report.calls == 0
    assert plans == [report.plan]
    assert report.plan.probes == len(report.not_asked) > 0
    assert report.plan.most_calls == 3 * report.plan.probes
    assert report.plan.context_tokens > 0
    assert {p.category for p in report.not_asked} >= {"error", "id", "state"}
    assert all(p.where and p.answer for p in report.not_asked)


def _judge(verdict: str) -> tuple[ScriptedModel, list[str]]:
    prompts: list[str] = []

    def grade(messages: Any) -> str:
        prompts.append(messages[-1].text)
        return verdict

    return ScriptedModel([grade] * 40), prompts


@pytest.mark.slow
async def test_a_judge_grades_the_open_probes_and_its_verdicts_are_kept(
    demo_workdir: Path,
) -> None:
    # The model answers every probe with the same words: key terms would count none of the
    # state probes; a judge saying CORRECT counts every one, and its words are kept.
    judge, prompts = _judge("CORRECT\nIt names the same step.")
    model = ScriptedModel(["ORD-58213"] * 40)
    report = await evaluate(str(demo_workdir), DEMO_SESSION, model, judge=judge)
    states = [r for r in report.results if r.probe.category == "state"]
    assert states and all(r.no_tools_correct and r.one_read_correct for r in states)
    assert all(r.no_tools_verdict.text.startswith("CORRECT") for r in states)  # type: ignore[union-attr]
    assert len(prompts) == 2 * len(states)  # artifacts are never sent to the judge
    assert states[0].probe.answer in prompts[0] and "ORD-58213" in prompts[0]
    exact = [r for r in report.results if r.probe.exact]
    assert all(r.no_tools_verdict is None for r in exact)
    assert report.plan.grading == f"judge {judge.model_name}"
    assert report.calls == len(model.calls) + len(prompts)
    probe = report.as_dict()["probes"][-1]
    assert probe["one_read"]["verdict"].startswith("CORRECT")


@pytest.mark.slow
async def test_a_judge_saying_incorrect_is_followed(demo_workdir: Path) -> None:
    judge, _ = _judge("INCORRECT: it does not say what was called")
    model = ScriptedModel([lambda messages: messages[-1].text] * 40)  # echoes the question
    report = await evaluate(str(demo_workdir), DEMO_SESSION, model, judge=judge)
    states = [r for r in report.results if r.probe.category == "state"]
    assert states and not any(r.no_tools_correct or r.one_read_correct for r in states)


@pytest.mark.slow
async def test_langchain_writes_a_summary_first_and_keeps_no_files(demo_workdir: Path) -> None:
    seen: list[list[Any]] = []

    def reply(messages: Any) -> str:
        seen.append(list(messages))
        return "The user wants the failed export explained." if len(seen) == 1 else "unknown"

    model = ScriptedModel([reply] * 60)
    plans: list[Any] = []
    report = await evaluate(
        str(demo_workdir), DEMO_SESSION, model, strategy="langchain", on_plan=plans.append
    )
    # The first call is the summary of what left at compaction 1, tool outputs whole.
    assert "<conversation>" in seen[0][-1].text and "ORD-" in seen[0][-1].text
    assert "tool_result-" not in seen[0][-1].text
    # The probes are asked after it, and the read-back tools read an empty folder.
    asked = seen[1]
    assert any("The user wants the failed export explained." in m.text for m in asked)
    assert report.summary_tokens >= 0 and report.plan.strategy == "langchain"
    assert plans[0].most_calls == 3 * plans[0].probes + 4  # a summary per compaction
    assert not any(r.one_read_correct for r in report.results if r.probe.exact)


async def test_a_model_no_door_can_ask_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    """Any ChatModel, or a host's model through its door (tests/integrations/test_*_eval.py);
    anything else is refused at once, naming what would do (no workspace is even read)."""
    from ctxoffload import ConfigError

    with pytest.raises(ConfigError, match=r"a dict, not a ctxoffload ChatModel .*LangChain"):
        await evaluate(str(tmp_path / "none"), "s", {"model": "gpt-4o"})
    with pytest.raises(ConfigError, match=r"judge .*a str, not a ctxoffload ChatModel"):
        await evaluate(str(tmp_path / "none"), "s", ScriptedModel([]), judge="gpt-4o")


@pytest.mark.parametrize("package", ["haystack.components.fake", "crewai.fake", "agents.fake"])
async def test_a_model_whose_framework_cannot_be_imported_is_refused_in_one_line(
    tmp_path: Path, package: str
) -> None:
    """An object whose class says it comes from a framework that is not importable here (a
    pickled model, a stub) is refused as a ConfigError naming it, never an ImportError."""
    from ctxoffload import ConfigError

    stub = type("Stub", (), {"__module__": package})()
    with pytest.raises(ConfigError, match=r"Stub|not installed"):
        await evaluate(str(tmp_path / "none"), "s", stub)
