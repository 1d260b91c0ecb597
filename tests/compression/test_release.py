"""`Compressor.release`: a compressor kept between runs (a door's, one per conversation) lets
go of the whole texts of the results it cut; a result cut again after it is cut from the file
it went to, into the same stand-in."""

from __future__ import annotations

import gc
import logging
import re
from pathlib import Path

import pytest

from ctxoffload import ContextConfig, LocalWorkspace, Msg, TextBlock, ToolResultBlock
from ctxoffload.compression import TRUNCATION_MARKER, Compressor
from ctxoffload.compression._truncate import Truncation  # the private unit under test
from ctxoffload.tokens import get_token_counter
from helpers import image_block

COUNTER = get_token_counter(exact=True)


def log(tag: str, lines: int = 20_000) -> str:
    """About a megabyte of numbered lines, none like another run's."""
    return "".join(f"{tag} {i:06d} INFO export batch {i} done\n" for i in range(lines))


def make(ws: LocalWorkspace) -> Compressor:
    config = ContextConfig(context_window=200_000, tool_result_limit=3_000)
    return Compressor(config, offloader=ws, session_id="s1", counter=COUNTER)


def held_whole(text: str) -> int:
    """How many live truncation records hold `text` whole."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, Truncation) and o.full_text == text)


def stored(ws: LocalWorkspace) -> list[Path]:
    return sorted((ws.workdir / "sessions" / "s1").glob("tool_result-*.txt"))


async def cut_then_release(
    ws: LocalWorkspace, output: str | list[TextBlock | object]
) -> tuple[Compressor, Msg, str, str]:
    """A result cut at its arrival, cut again to 500 tokens, then released and cut again:
    the compressor, the message as it arrived cut, and the two later cuts."""
    comp = make(ws)
    arrived = Msg(role="tool", content=[ToolResultBlock(id="c1", name="fetch", output=output)])
    kept = await comp.process_message(arrived)
    (before,) = (await comp.cut_to_fit([kept], 500))[0].tool_results
    comp.release()
    (after,) = (await comp.cut_to_fit([kept], 500))[0].tool_results
    return comp, kept, str(before.output), str(after.output)


@pytest.mark.slow
async def test_release_lets_go_of_the_whole_text_and_a_cut_again_reads_its_file(
    local_ws: LocalWorkspace,
) -> None:
    text = log("r1")
    comp = make(local_ws)
    arrived = Msg(role="tool", content=[ToolResultBlock(id="c1", name="fetch", output=text)])
    kept = await comp.process_message(arrived)
    (before,) = (await comp.cut_to_fit([kept], 500))[0].tool_results
    assert held_whole(text) == 1

    comp.release()

    assert held_whole(text) == 0
    (after,) = (await comp.cut_to_fit([kept], 500))[0].tool_results
    assert after.output == before.output  # same head, same notice, the same file named
    assert TRUNCATION_MARKER in str(after.output) and COUNTER.count_text(str(after.output)) < 600
    (file,) = stored(local_ws)
    assert file.read_text(encoding="utf-8") == text and str(file) in str(after.output)


async def test_a_result_given_whole_again_after_release_is_known_and_not_stored_again(
    local_ws: LocalWorkspace,
) -> None:
    text = log("r2")
    comp = make(local_ws)
    whole = Msg(role="tool", content=[ToolResultBlock(id="c1", name="fetch", output=text)])
    await comp.process_message(whole)
    (before,) = (await comp.cut_to_fit([whole], 500))[0].tool_results

    comp.release()

    (after,) = (await comp.cut_to_fit([whole], 500))[0].tool_results
    assert after.output == before.output
    assert len(stored(local_ws)) == 1


async def test_a_result_with_an_image_keeps_naming_it_after_release(
    local_ws: LocalWorkspace,
) -> None:
    """The notice names the images a result held; cut again from the file after release, it
    still does (a stand-in cut from the record alone would not)."""
    output = [TextBlock(text=log("r3")), image_block()]
    _, _, before, after = await cut_then_release(local_ws, output)
    # Named compactly ("image/png in ...") or in full ("image (image/png) in ..."), whichever
    # fits the limit: the workspace's path is part of the notice, and pytest's tmp_path is
    # longer on a machine that has run pytest more often.
    assert re.search(r"image/png\)? in \S+/data/[0-9a-f]{64}\.png", before), before[-600:]
    assert after == before


async def test_a_file_that_no_longer_holds_the_result_is_said_and_never_cut_from(
    local_ws: LocalWorkspace, caplog: pytest.LogCaptureFixture
) -> None:
    """The whole text is known by its digest: a file rewritten meanwhile is not cut from as if
    it held the result (the model would be shown another output under its call)."""
    text = log("r4")
    comp = make(local_ws)
    arrived = Msg(role="tool", content=[ToolResultBlock(id="c1", name="fetch", output=text)])
    kept = await comp.process_message(arrived)
    comp.release()
    (file,) = stored(local_ws)
    file.write_text("someone else's text\n" * 50_000, encoding="utf-8")

    with caplog.at_level(logging.WARNING, logger="ctxoffload"):
        (after,) = (await comp.cut_to_fit([kept], 500))[0].tool_results

    assert "someone else" not in str(after.output)
    assert "no longer holds the result" in caplog.text
