"""Retrieval of offloaded content: line ranges, patterns, the head, caps and refusals."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxoffload.exceptions import ConfigError, InvalidContent, InvalidReference
from ctxoffload.readback import FileToolbox, retrieve_offloaded_content
from ctxoffload.readback._retrieval import decode_reference_text, format_retrieval

REF = "/ws/sessions/s1/tool_result-call_1.txt"


class DictSource:
    """An in-memory backend: each reference is a key of a dict of bytes."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    async def read_reference(self, reference: str) -> bytes:
        try:
            return self.files[reference]
        except KeyError:
            raise InvalidReference(f"unknown reference {reference!r}") from None


def _log(errors: tuple[int, ...] = (5, 6, 20), total: int = 30) -> str:
    return "".join(
        (f"ERROR at {n}" if n in errors else f"line {n}") + "\n" for n in range(1, total + 1)
    )


# -- the async entry point -------------------------------------------------------------------


async def test_retrieve_reads_the_reference_from_the_source() -> None:
    source = DictSource({REF: b"alpha\nbeta\n"})
    assert await retrieve_offloaded_content(source, REF) == (
        f"{REF}: lines 1–2 of 2\n     1\talpha\n     2\tbeta"
    )


async def test_retrieve_passes_every_argument_through() -> None:
    source = DictSource({REF: _log().encode()})
    result = await retrieve_offloaded_content(
        source, REF, "ERROR", (1, 10), 1, max_lines=3, max_chars=1_000, max_line_chars=50
    )
    assert result == "\n".join(
        [
            f"{REF}: 2 matching lines for 'ERROR' (lines 1–10 of 30)",
            "      4\tline 4",
            ">     5\tERROR at 5",
            ">     6\tERROR at 6",
            "[capped at 3 lines: every matching line is shown, some context is not; lower "
            "context_lines or pass line_range]",
        ]
    )


async def test_unknown_reference_propagates_invalid_reference() -> None:
    with pytest.raises(InvalidReference, match="unknown reference"):
        await retrieve_offloaded_content(DictSource({}), "/ws/nope.txt")


async def test_binary_reference_is_refused_with_its_name() -> None:
    source = DictSource({"/ws/data/abc.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"})
    with pytest.raises(InvalidContent, match=r"'/ws/data/abc\.png' holds binary data.*data file"):
        await retrieve_offloaded_content(source, "/ws/data/abc.png")


async def test_mostly_undecodable_bytes_are_refused() -> None:
    source = DictSource({REF: bytes(range(0x80, 0x100)) * 4})
    with pytest.raises(InvalidContent, match="not UTF-8"):
        await retrieve_offloaded_content(source, REF)


async def test_a_few_undecodable_bytes_are_replaced() -> None:
    source = DictSource({REF: "café au lait\n".encode("latin-1")})
    assert (await retrieve_offloaded_content(source, REF)).endswith("     1\tcaf\ufffd au lait")


def test_real_replacement_characters_are_not_counted_as_undecodable() -> None:
    text = "\ufffd" * 10 + "\n"
    assert decode_reference_text(text.encode(), REF) == text


def test_retrieve_offloaded_content_is_exported() -> None:
    import ctxoffload.readback

    assert "retrieve_offloaded_content" in ctxoffload.readback.__all__


# -- whole text, line ranges and the head ----------------------------------------------------


def test_plain_text_is_numbered_like_read() -> None:
    assert (
        format_retrieval("a\nb\r\nc", REF)
        == f"{REF}: lines 1–3 of 3\n     1\ta\n     2\tb\n     3\tc"
    )


def test_line_range_shows_those_lines() -> None:
    assert format_retrieval(_log(), REF, line_range=(4, 6)).splitlines() == [
        f"{REF}: lines 4–6 of 30",
        "     4\tline 4",
        "     5\tERROR at 5",
        "     6\tERROR at 6",
    ]


def test_line_range_end_is_clamped() -> None:
    assert format_retrieval(_log(), REF, line_range=(29, 500)).splitlines() == [
        f"{REF}: lines 29–30 of 30",
        "    29\tline 29",
        "    30\tline 30",
    ]


def test_line_range_past_the_end_says_how_long_the_content_is() -> None:
    assert format_retrieval(_log(), REF, line_range=(31, 40)) == (
        f"{REF}: 30 lines; line_range=[31, 40] starts past the end: pass a range within 1–30."
    )


@pytest.mark.parametrize("line_range", [(0, 5), (-3, 2), (6, 5), ("a", 2), (1,)])
def test_impossible_line_range_is_invalid_content(line_range: tuple[int, int]) -> None:
    with pytest.raises(InvalidContent, match="line_range="):
        format_retrieval(_log(), REF, line_range=line_range)


def test_context_lines_alone_shows_the_head() -> None:
    assert format_retrieval(_log(), REF, context_lines=2).splitlines() == [
        f"{REF}: lines 1–2 of 30",
        "     1\tline 1",
        "     2\tline 2",
    ]


def test_context_lines_zero_alone_shows_no_line() -> None:
    assert format_retrieval(_log(), REF, context_lines=0) == (
        f"{REF}: 30 lines; none shown (context_lines=0)."
    )


def test_empty_content() -> None:
    assert format_retrieval("", REF) == f"{REF} is empty (0 lines)."


# -- patterns --------------------------------------------------------------------------------


def test_pattern_marks_matches_without_context_by_default() -> None:
    assert format_retrieval(_log(), REF, "ERROR").splitlines() == [
        f"{REF}: 3 matching lines for 'ERROR' (30 lines)",
        ">     5\tERROR at 5",
        ">     6\tERROR at 6",
        ">    20\tERROR at 20",
    ]


def test_pattern_with_context_separates_hunks() -> None:
    assert format_retrieval(_log(), REF, "ERROR", context_lines=2).splitlines() == [
        f"{REF}: 3 matching lines for 'ERROR' (30 lines)",
        "      3\tline 3",
        "      4\tline 4",
        ">     5\tERROR at 5",
        ">     6\tERROR at 6",
        "      7\tline 7",
        "      8\tline 8",
        "--",
        "     18\tline 18",
        "     19\tline 19",
        ">    20\tERROR at 20",
        "     21\tline 21",
        "     22\tline 22",
    ]


def test_hunks_whose_context_touches_are_merged() -> None:
    # Windows 4-6 and 7-9 touch: one hunk, no separator.
    result = format_retrieval(_log(errors=(5, 8)), REF, "ERROR", context_lines=1)
    assert "--" not in result
    assert [line[1:7].strip() for line in result.splitlines()[1:]] == [str(n) for n in range(4, 10)]


def test_pattern_with_line_range_searches_only_the_range() -> None:
    assert format_retrieval(
        _log(), REF, "ERROR", line_range=(6, 19), context_lines=3
    ).splitlines() == [
        f"{REF}: 1 matching line for 'ERROR' (lines 6–19 of 30)",
        ">     6\tERROR at 6",
        "      7\tline 7",
        "      8\tline 8",
        "      9\tline 9",
    ]


def test_no_matches_is_an_answer_not_an_error() -> None:
    assert format_retrieval(_log(), REF, "WARN") == (
        f"{REF}: no lines match 'WARN' (30 lines searched)."
    )


def test_invalid_regex_is_invalid_content_with_the_regex_error() -> None:
    with pytest.raises(InvalidContent, match=r"invalid regular expression 'ERROR\(': missing \)"):
        format_retrieval(_log(), REF, "ERROR(")


def test_negative_context_is_invalid_content() -> None:
    with pytest.raises(InvalidContent, match="context_lines=-1"):
        format_retrieval(_log(), REF, "ERROR", context_lines=-1)


# -- caps ------------------------------------------------------------------------------------


def test_matches_beyond_max_lines_are_counted_in_the_note() -> None:
    text = "".join(f"hit {n}\n" for n in range(1, 1_301))
    result = format_retrieval(text, REF, "hit", max_lines=66)
    lines = result.splitlines()
    assert len(lines) == 1 + 66 + 1
    assert lines[-2] == ">    66\thit 66"
    assert lines[-1] == "[capped: 1,234 more matching lines; narrow the pattern or pass line_range]"


def test_plain_cap_says_which_range_comes_next() -> None:
    text = "".join(f"row {n}\n" for n in range(1, 101))
    first = format_retrieval(text, REF, max_lines=40).splitlines()
    assert first[-1] == "[capped: 60 more lines; pass line_range=[41, 80] to continue]"
    second = format_retrieval(text, REF, line_range=(41, 80), max_lines=40).splitlines()
    assert second[1] == "    41\trow 41"
    assert second[-1] == "    80\trow 80"


def test_max_chars_bounds_the_whole_result() -> None:
    text = ("z" * 900 + "\n") * 100
    for pattern in (None, "z"):
        result = format_retrieval(text, REF, pattern, max_chars=5_000)
        assert len(result) <= 5_000
        assert result.splitlines()[-1].startswith("[capped: ")


def test_long_lines_are_cut_with_a_count() -> None:
    result = format_retrieval("x" * 5_000 + "\n", REF, max_line_chars=100)
    assert result.splitlines()[1] == (
        "     1\t"
        + "x" * 100
        + "… [line cut: 4,900 more characters]"
        + " (pass line_range=[1, 1], char_offset=100 for the rest)"
    )


def test_long_matching_line_shows_a_window_around_the_match() -> None:
    text = "x" * 5_000 + "NEEDLE" + "y" * 5_000 + "\n"
    line = format_retrieval(text, REF, "NEEDLE", max_line_chars=100).splitlines()[1]
    assert line.startswith(">     1\t…")
    assert "NEEDLE" in line
    assert line.endswith("[line has 10,006 characters; showing 4,976–5,075]")


@pytest.mark.parametrize("caps", [{"max_lines": 0}, {"max_chars": 499}, {"max_line_chars": 0}])
def test_impossible_caps_are_config_errors(caps: dict[str, int]) -> None:
    with pytest.raises(ConfigError):
        format_retrieval(_log(), REF, **caps)  # type: ignore[arg-type]


def test_nul_in_text_is_refused() -> None:
    with pytest.raises(InvalidContent, match="binary data"):
        format_retrieval("a\x00b", REF)


# -- agreement with the Read tool ------------------------------------------------------------


def test_line_numbers_agree_with_the_read_tool(tmp_path: Path) -> None:
    # Only "\n" separates lines: \r\n, a lone \r, \x0b, \x0c and U+2028 must not shift numbers.
    data = "one\r\ntwo\rstill two\nthree\x0bthree\nfour\u2028four\x0cfour\nfive"
    (tmp_path / "mixed.txt").write_text(data, encoding="utf-8", newline="")
    read = FileToolbox([tmp_path]).read("mixed.txt").split("\n")
    retrieved = format_retrieval(data, REF).split("\n")[1:]
    assert retrieved == read
    assert [row.split("\t")[0].strip() for row in read] == ["1", "2", "3", "4", "5"]


@given(
    st.lists(
        # Control characters aside: text mostly made of them is binary (`binary_reason`).
        st.text(st.characters(exclude_categories=["Cc", "Cs"]), max_size=30),
        min_size=1,
        max_size=60,
    ),
    st.data(),
)
def test_every_line_shown_is_the_line_with_that_number(
    lines: list[str], data: st.DataObject
) -> None:
    first = data.draw(st.integers(1, len(lines)))
    last = data.draw(st.integers(first, len(lines) + 5))
    text = "\n".join(lines) + "\n"
    result = format_retrieval(text, REF, line_range=(first, last), max_line_chars=100)
    shown = result.split("\n")[1:]
    assert len(shown) == min(last, len(lines)) - first + 1
    for row in shown:
        number, text = row.split("\t", 1)
        assert text == lines[int(number) - 1]


async def test_a_catastrophic_pattern_keeps_the_event_loop_running() -> None:
    import time

    ticks: list[float] = []

    async def heartbeat() -> None:
        while True:
            await asyncio.sleep(0.01)
            ticks.append(time.monotonic())

    source = DictSource({"ref": (("a" * 40 + "b\n") * 2_000).encode()})
    beating = asyncio.create_task(heartbeat())
    try:
        result = await asyncio.wait_for(
            retrieve_offloaded_content(source, "ref", pattern="(a+)+$"), timeout=60
        )
    finally:
        beating.cancel()
    assert result == "ref: no lines match '(a+)+$' (2000 lines searched)."


def test_backreferences_are_refused_with_what_to_do() -> None:
    with pytest.raises(InvalidContent, match="not supported"):
        format_retrieval("aa\n", "ref", pattern=r"(a)\1")


async def test_retrieval_tool_works_with_any_source_and_answers_errors_as_text() -> None:
    from ctxoffload.agent import as_tool
    from ctxoffload.agent import retrieval_tool as reexported
    from ctxoffload.readback import retrieval_tool

    assert reexported is retrieval_tool
    tool = retrieval_tool(DictSource({"ref": b"ok\nERROR boom\nok\n"}))
    assert tool.__name__ == "retrieve_offloaded_content"
    assert tool.ctxoffload_reader is True  # type: ignore[attr-defined]
    assert as_tool(tool) is not None
    assert await tool("ref", pattern="ERROR", context_lines=1) == (
        "ref: 1 matching line for 'ERROR' (3 lines)\n      1\tok\n>     2\tERROR boom\n      3\tok"
    )
    assert await tool("ref", line_range=[2, 2]) == "ref: lines 2–2 of 3\n     2\tERROR boom"
    assert (await tool("missing")).startswith("Error: unknown reference 'missing'")
    assert (await tool("ref", pattern="(?=a)")).startswith("Error: invalid regular expression")
    assert (await tool("ref", line_range=[3, 1])).startswith("Error: line_range=[3, 1]")


# -- a line range read from the bytes ---------------------------------------------------------

_LINE_PIECES = ["a", "é", "\r", "\xff", '{"role": "user", "content": "x\\ny"}', "", "€" * 3]


@pytest.mark.slow
@given(
    lines=st.lists(st.lists(st.sampled_from(_LINE_PIECES), max_size=4).map("".join), max_size=30),
    newline_at_end=st.booleans(),
    first=st.integers(1, 35),
    length=st.integers(0, 40),
    context_lines=st.one_of(st.none(), st.integers(0, 40)),
    max_lines=st.integers(1, 12),
    jsonl=st.booleans(),
)
def test_a_line_range_read_from_the_bytes_is_what_the_decoded_text_gives(
    lines: list[str],
    newline_at_end: bool,
    first: int,
    length: int,
    context_lines: int | None,
    max_lines: int,
    jsonl: bool,
) -> None:
    # Only the lines a page shows are decoded (`_window`); the answer is the one the whole
    # text, decoded and split, gives: numbering, "\r" before "\n", bytes not UTF-8 (here
    # "\xff" stands for the byte 0xff), a last line without its newline, the caps.
    data = "\n".join(lines).encode().replace("\xff".encode(), b"\xff")
    data += b"\n" * (newline_at_end and bool(lines))
    reference = "/ws/sessions/s/context.jsonl" if jsonl else REF
    line_range = None if context_lines is not None else (first, first + length)
    caps = {"max_lines": max_lines, "max_chars": 600, "max_line_chars": 40}
    try:
        whole = format_retrieval(
            decode_reference_text(data, reference),
            reference,
            None,
            line_range,
            context_lines,
            caps["max_lines"],
            caps["max_chars"],
            max_line_chars=caps["max_line_chars"],
        )
    except InvalidContent as refused:
        whole = f"refused: {refused}"
    source = DictSource({reference: data})
    try:
        window = asyncio.run(
            retrieve_offloaded_content(
                source, reference, line_range=line_range, context_lines=context_lines, **caps
            )
        )
    except InvalidContent as refused:
        window = f"refused: {refused}"
    # Binary content (here, mostly the byte 0xff) is refused by one rule, whatever is read.
    assert window == whole
