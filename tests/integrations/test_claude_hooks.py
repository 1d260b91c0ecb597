"""`ctxoffload.integrations.claude.OffloadingHooks` against the real Claude Agent SDK: its
`HookMatcher`, its typed hook inputs, and the Claude Code CLI the SDK bundles (which validates
the plugin). The SDK runs an agent only through that CLI and a model, which these tests have
not: the callbacks are called as the SDK calls them, with the inputs it sends."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from frameworks import require_framework

from claude_code_hooks import (
    SESSION,
    post_tool_use_bash,
    post_tool_use_mcp,
    pre_compact,
    transcript_rows,
)
from ctxoffload import LocalWorkspace
from ctxoffload.integrations.claude import OffloadingHooks
from ctxoffload.tokens import get_token_counter

sdk = require_framework("claude_agent_sdk", "claude")

NOTICE = "<<<TRUNCATED>>>"


def typed(kind: str, value: dict[str, Any]) -> Any:
    """`value` as the SDK's typed input `kind` (a TypedDict: checked for its keys)."""
    cls = getattr(sdk.types, kind)
    missing = {k for k in cls.__required_keys__ if k not in value}
    assert not missing, f"the fixture lacks {missing} of {kind}"
    return cls(**value)


def write_transcript(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def test_matchers_are_the_sdks_hook_matchers(tmp_path: Path) -> None:
    matchers = OffloadingHooks(LocalWorkspace(tmp_path)).matchers()
    assert set(matchers) == {"PostToolUse", "PreCompact", "UserPromptSubmit"}
    assert set(matchers) <= set(sdk.types.HookEvent.__args__[i].__args__[0] for i in range(10))
    for (matcher,) in matchers.values():
        assert isinstance(matcher, sdk.HookMatcher) and len(matcher.hooks) == 1
    options = sdk.ClaudeAgentOptions(hooks=matchers)  # the SDK takes them as they are
    assert options.hooks is matchers


async def test_a_big_bash_output_is_stored_and_replaced(tmp_path: Path) -> None:
    stdout = "\n".join(f"test_{i} PASSED" for i in range(50_000))
    callbacks = OffloadingHooks(LocalWorkspace(tmp_path))
    given = typed("PostToolUseHookInput", post_tool_use_bash(stdout))
    out = await callbacks.post_tool_use(given, given["tool_use_id"], {"signal": None})
    specific = out["hookSpecificOutput"]
    assert specific["hookEventName"] == "PostToolUse"
    replaced = specific["updatedToolOutput"]
    assert set(replaced) == {"stdout", "stderr", "interrupted", "isImage"}
    assert NOTICE in replaced["stdout"] and len(replaced["stdout"]) < 20_000
    stored = tmp_path / "sessions" / SESSION / "tool_result-toolu_01ABC123.txt"
    assert stored.read_text(encoding="utf-8") == stdout
    # What the SDK sends back to the CLI: its own output type, JSON-serialisable.
    json.dumps(sdk.types.SyncHookJSONOutput(**out))


async def test_an_mcp_output_is_replaced_in_both_fields(tmp_path: Path) -> None:
    text = "\n".join(f"issue #{i}: flaky test" for i in range(20_000))
    callbacks = OffloadingHooks(LocalWorkspace(tmp_path))
    out = await callbacks.post_tool_use(post_tool_use_mcp(text), "toolu_01MCP", {"signal": None})
    specific = out["hookSpecificOutput"]
    assert specific["updatedMCPToolOutput"] == specific["updatedToolOutput"]
    assert set(specific) <= set(sdk.types.PostToolUseHookSpecificOutput.__annotations__)


async def test_an_mcp_output_of_many_texts_reaches_the_model_as_one_preview(
    tmp_path: Path,
) -> None:
    # 60 blocks each under the limit: measured alone, 174,000 tokens reached the model whole.
    texts = [
        "\n".join(f"block {j} row {i}: quick brown fox" for i in range(400)) for j in range(60)
    ]
    given = post_tool_use_mcp("")
    given["tool_response"] = [{"type": "text", "text": text} for text in texts]
    out = await OffloadingHooks(LocalWorkspace(tmp_path)).post_tool_use(
        given, "toolu_01MCP", {"signal": None}
    )
    (block,) = out["hookSpecificOutput"]["updatedToolOutput"]
    assert NOTICE in block["text"] and get_token_counter(None).count_text(block["text"]) <= 3_000
    stored = tmp_path / "sessions" / SESSION / "tool_result-toolu_01MCP.txt"
    assert stored.read_text(encoding="utf-8") == "\n".join(texts)


def custom_tool_output(response: Any) -> dict[str, Any]:
    """A PostToolUse input for a custom tool of the SDK (an in-process MCP server's) whose
    output is `response`."""
    given = post_tool_use_mcp("")
    given["tool_name"] = "mcp__crm__export_customers"
    given["tool_response"] = response
    return given


@pytest.mark.parametrize("value", [7, "ok"], ids=["numbers", "short-texts"])
async def test_a_dict_of_many_fields_is_measured_with_its_names_and_stored_whole(
    tmp_path: Path, value: object
) -> None:
    # 5,000 fields: their names were never counted, so the output reached Claude whole
    # (numbers: 21,946 tokens) or with its values stored apart from their names.
    fields = {f"customer_{i:04d}_lifetime_value": value for i in range(5_000)}
    counter = get_token_counter(None)
    assert counter.count_text(json.dumps(fields)) > 20_000
    out = await OffloadingHooks(LocalWorkspace(tmp_path)).post_tool_use(
        custom_tool_output(fields), "toolu_01MCP", {"signal": None}
    )
    replaced = out["hookSpecificOutput"]["updatedToolOutput"]
    assert out["hookSpecificOutput"]["updatedMCPToolOutput"] == replaced
    assert isinstance(replaced, str) and NOTICE in replaced
    assert counter.count_text(json.dumps(replaced)) <= 3_000
    assert '"customer_0000_lifetime_value"' in replaced
    stored = tmp_path / "sessions" / SESSION / "tool_result-toolu_01MCP.txt"
    assert str(stored) in replaced
    assert json.loads(stored.read_text(encoding="utf-8")) == fields  # whole, names and all


async def test_a_list_of_many_numbers_keeps_its_image_and_is_stored_whole(tmp_path: Path) -> None:
    image = {"type": "image", "data": "iVBORw0KGgo=" * 40, "mimeType": "image/png"}
    numbers = {"type": "text", "text": "ids"}
    response = [numbers, *({"type": "resource_link", "id": i} for i in range(4_000)), image]
    out = await OffloadingHooks(LocalWorkspace(tmp_path)).post_tool_use(
        custom_tool_output(response), "toolu_01MCP", {"signal": None}
    )
    text, kept_image = out["hookSpecificOutput"]["updatedToolOutput"]
    assert text["type"] == "text" and NOTICE in text["text"] and kept_image == image
    stored = tmp_path / "sessions" / SESSION / "tool_result-toolu_01MCP.txt"
    assert json.loads(stored.read_text(encoding="utf-8")) == response[:-1]


async def test_a_small_dict_gets_no_opinion(tmp_path: Path) -> None:
    small = {f"field_{i}": i for i in range(20)}
    callbacks = OffloadingHooks(LocalWorkspace(tmp_path))
    assert await callbacks.post_tool_use(custom_tool_output(small), "t", {"signal": None}) == {}


async def test_a_small_output_gets_no_opinion(tmp_path: Path) -> None:
    callbacks = OffloadingHooks(LocalWorkspace(tmp_path))
    assert await callbacks.post_tool_use(post_tool_use_bash("ok"), "t", {"signal": None}) == {}


async def test_a_failing_workspace_never_fails_the_agent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A workdir that is a file is refused when the hooks are built (the door contract); one
    # that turns into a file afterwards fails each write, and the agent goes on.
    callbacks = OffloadingHooks(LocalWorkspace(tmp_path / "ws"))
    shutil.rmtree(tmp_path / "ws", ignore_errors=True)
    (tmp_path / "ws").write_text("x", encoding="utf-8")
    big = post_tool_use_bash("\n".join(f"r{i}" for i in range(20_000)))
    assert await callbacks.post_tool_use(big, "t", {"signal": None}) == {}
    transcript = write_transcript(tmp_path / "t.jsonl", transcript_rows(2))
    assert await callbacks.pre_compact(pre_compact(transcript), None, {"signal": None}) == {}
    bad = await callbacks.pre_compact(pre_compact("/no/such.jsonl"), None, {"signal": None})
    assert bad == {} and "does not exist" in caplog.text


async def test_after_a_compaction_the_index_reaches_the_model_once(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path / "ws")
    callbacks = OffloadingHooks(ws)
    transcript = write_transcript(tmp_path / "t.jsonl", transcript_rows(8))
    given = typed("PreCompactHookInput", pre_compact(transcript))
    assert await callbacks.pre_compact(given, None, {"signal": None}) == {}
    kept = (tmp_path / "ws" / "sessions" / SESSION / "context.jsonl").read_text().splitlines()
    assert len(kept) == 24
    prompt = typed(
        "UserPromptSubmitHookInput",
        {**pre_compact(transcript), "hook_event_name": "UserPromptSubmit", "prompt": "go on"},
    )
    out = await callbacks.user_prompt_submit(prompt, None, {"signal": None})
    context = out["hookSpecificOutput"]["additionalContext"]
    assert out["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert "/srv/out/part-7.csv" in context and "context.jsonl" in context
    assert await callbacks.user_prompt_submit(prompt, None, {"signal": None}) == {}  # once
    # After the next compaction, the first tool result carries it, beside its own change.
    await callbacks.pre_compact(given, None, {"signal": None})
    big = post_tool_use_bash("\n".join(f"r{i}" for i in range(20_000)))
    out = await callbacks.post_tool_use(big, "toolu_01ABC123", {"signal": None})
    assert NOTICE in out["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    assert out["hookSpecificOutput"]["additionalContext"] == context


def _bundled_claude() -> Path:
    found = Path(sdk.__file__).parent / "_bundled" / "claude"
    if not found.is_file():
        pytest.skip("this claude-agent-sdk wheel bundles no Claude Code CLI")
    return found


@pytest.mark.parametrize("folder", ["integrations/claude-code-plugin", "."])
def test_claude_code_validates_the_plugin_and_the_marketplace(tmp_path: Path, folder: str) -> None:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [str(_bundled_claude()), "plugin", "validate", str(root / folder)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Validation passed" in done.stdout
    if folder != ".":
        launcher = '/bin/sh \\"${CLAUDE_PLUGIN_ROOT}/hooks/run-ctxoffload\\"'
        for event in ("PostToolUse", "PreCompact", "SessionStart"):
            assert f'command "{launcher} hook {event}"' in done.stdout
