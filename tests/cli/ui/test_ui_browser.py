"""`ctxoffload ui` in a real headless Chromium (Debian's package) driven by Playwright: the
numbers on the page, a step, a stored file, search, the difference, live updates, and hostile
session content shown as inert text. A screenshot of the timeline is saved as an artifact."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from ui_running import Ui, artifacts, cli_json, plain_server, start_ui, stop_ui

from ctxoffload._disk.events import EventKind

pytestmark = pytest.mark.xdist_group("browser")  # one Chromium at a time on a small machine


def open_session(page: Any, ui: Ui, session: str = "nightly-job") -> None:
    page.goto(ui.url + f"#session={session}")
    page.wait_for_selector(".step")


@pytest.mark.slow
def test_the_bars_are_the_numbers_show_json_gives(page: Any, ui: Ui) -> None:
    open_session(page, ui)
    shown = cli_json(ui.workdir, "show", "nightly-job", "--json")
    recorded = {e["step"]: e for e in shown["events"] if e["kind"] == EventKind.MODEL_CALL}
    bars = page.eval_on_selector_all(
        ".step",
        """steps => steps.map(s => ({
            step: Number(s.dataset.step),
            tokens: Number(s.dataset.tokens),
            parts: Object.fromEntries([...s.querySelectorAll('.seg')].map(
                g => [g.dataset.part, Number(g.dataset.tokens)])),
            heights: [...s.querySelectorAll('.seg')].map(g => g.getBoundingClientRect().height),
        }))""",
    )
    assert [b["step"] for b in bars] == sorted(recorded)
    for bar in bars:
        event = recorded[bar["step"]]
        assert bar["parts"] == event["window"]
        assert bar["tokens"] == event["tokens_counted"]
        # The picture agrees with the numbers: heights in the proportions of the parts.
        total_height = sum(bar["heights"])
        assert total_height > 0
        for height, tokens in zip(bar["heights"], event["window"].values(), strict=True):
            assert abs(height / total_height - tokens / sum(event["window"].values())) < 0.02
    # The window and trigger lines, and the compression marks, are drawn.
    assert "window 4,000" in page.inner_text(".rule.window")
    assert "trigger 2,800" in page.inner_text(".rule.trigger")
    assert page.locator(".mark.compression").count() >= 1
    assert "compressed" in (page.get_attribute(".mark.compression >> nth=0", "title") or "")
    assert page.locator("#events pre").count() > 20
    page.screenshot(path=str(artifacts() / "ui-timeline.png"))


@pytest.mark.slow
def test_a_step_shows_what_the_model_was_sent_and_its_files_open(page: Any, ui: Ui) -> None:
    open_session(page, ui)
    sent = cli_json(ui.workdir, "show", "nightly-job", "--step", "4", "--json")["messages"]
    page.click('.step[data-step="4"]')
    page.wait_for_selector("#step-title")
    assert f"the model was sent {len(sent)} messages" in page.inner_text("#step-title")
    ids = page.eval_on_selector_all("#panel .message", "ms => ms.map(m => m.dataset.id)")
    assert ids == [m["id"] for m in sent]
    assert "summary" in page.inner_text('#panel tr[data-part="summary"]')
    link = page.locator('#panel a.ref[data-path^="sessions/nightly-job/tool_result-"]').first
    path = link.get_attribute("data-path")
    assert path
    link.click()
    page.wait_for_selector("#file-text")
    first_line = (ui.workdir / path).read_text().splitlines()[0]
    assert first_line[:200] in page.inner_text("#file-text")
    assert "read-only" in page.inner_text("#panel h3")


@pytest.mark.slow
def test_search_lists_what_grep_finds(page: Any, ui: Ui) -> None:
    open_session(page, ui)
    hits = cli_json(ui.workdir, "grep", "--json", "-F", "order_id=ORD-5821")
    page.fill("#search", "order_id=ORD-5821")
    page.check("#fixed")
    page.click("#search-form button")
    page.wait_for_selector("#search-title")
    assert f"{len(hits):,} matching lines" in page.inner_text("#search-title")
    rows = page.eval_on_selector_all(
        "#panel .hit", "hs => hs.map(h => [h.dataset.path, Number(h.dataset.line)])"
    )
    assert rows == [[str(Path(h["file"]).relative_to(ui.workdir)), h["line"]] for h in hits]
    page.click("#panel .hit a.ref >> nth=0")
    page.wait_for_selector("#file-text")
    assert "ORD-5821" in page.inner_text("#file-text")


@pytest.mark.slow
def test_search_names_a_binary_file_no_search_reads(page: Any, tmp_path: Path) -> None:
    session = tmp_path / "sessions" / "s"
    session.mkdir(parents=True)
    (session / "tool_result-text.txt").write_text("ERROR in text\n")
    (session / "tool_result-png.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00 ERROR\n")
    running = start_ui(tmp_path)
    try:
        page.goto(running.url)
        page.fill("#search", "ERROR")
        page.click("#search-form button")
        page.wait_for_selector("#search-title")
        assert "1 matching lines" in page.inner_text("#search-title")
        assert "tool_result-png.txt: binary file (NUL bytes in its first 8 KB), not searched" in (
            page.inner_text("#panel")
        )
    finally:
        stop_ui(running)


@pytest.mark.slow
def test_the_difference_between_two_steps(page: Any, ui: Ui) -> None:
    open_session(page, ui)
    # The demo's first compression comes before step 5: messages leave between 4 and 5.
    page.select_option("#compare-from", "4")
    page.select_option("#compare-to", "5")
    page.click("#compare button")
    page.wait_for_selector("#panel h4")
    assert "from step 4 to step 5" in page.inner_text("#panel h3")
    assert page.locator("#panel .message.left").count() >= 1


@pytest.mark.slow
def test_a_new_step_appears_while_the_session_runs(page: Any, own_demo: Path) -> None:
    ui = start_ui(own_demo)
    try:
        open_session(page, ui)
        before = page.locator(".step").count()
        script = textwrap.dedent(
            f"""
            import asyncio
            from ctxoffload import Agent, LocalWorkspace, ScriptedModel
            async def main():
                agent = Agent(
                    name="analyst",
                    model=ScriptedModel(["one more answer"]),
                    offloader=LocalWorkspace({str(own_demo)!r}),
                    session_id="nightly-job",
                )
                await agent.reply("one more question")
            asyncio.run(main())
            """
        )
        subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
        page.wait_for_selector(f'.step[data-step="{before + 1}"]', timeout=30_000)
        assert page.locator(".step").count() == before + 1
        assert page.get_attribute("#live", "class") == "live on"
    finally:
        stop_ui(ui)


HOSTILE = (
    '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
    "\x1b[2J\x1b]52;c;aGVsbG8=\x07 <b>bold?</b>"
)


@pytest.mark.slow
def test_hostile_content_renders_as_inert_text(page: Any, tmp_path: Path) -> None:
    """A tool result holding markup, terminal escapes and a 5 MB line: the page shows each as
    text, runs nothing, and stays usable."""
    import asyncio
    import concurrent.futures

    from ctxoffload import Agent, ContextConfig, LocalWorkspace, ScriptedModel, ToolCallBlock
    from ctxoffload.messages import Msg

    huge = "A" * (5 << 20)

    def fetch() -> str:
        """Fetch the page."""
        return HOSTILE + "\n" + huge + "\nthe end\n"

    async def run() -> None:
        agent = Agent(
            name="victim",
            model=ScriptedModel(
                [
                    Msg(
                        role="assistant",
                        content=[ToolCallBlock(id="call_1", name="fetch", input={})],
                    ),
                    "done " + HOSTILE,
                ]
            ),
            offloader=LocalWorkspace(tmp_path / "ws"),
            tools=[fetch],
            session_id="hostile",
            context_config=ContextConfig(context_window=200_000, tool_result_limit=2_000),
        )
        await agent.reply("look at " + HOSTILE)

    # Playwright's sync API runs an event loop in this thread: the agent runs in another.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, run()).result()
    ui = start_ui(tmp_path / "ws")
    try:
        open_session(page, ui, "hostile")
        page.click('.step[data-step="2"]')
        page.wait_for_selector("#step-title")
        bodies = page.eval_on_selector_all(
            "#panel .message pre", "ps => ps.map(p => p.textContent)"
        )
        assert any("<script>window.__pwned = 1</script>" in b for b in bodies)
        assert any("\\x1b[2J" in b for b in bodies)  # the escape shown, not obeyed
        assert not any("\x1b" in b for b in bodies)
        events = page.inner_text("#events")
        assert "<script>" in events
        link = page.locator('#panel a.ref[data-path="sessions/hostile/tool_result-call_1.txt"]')
        link.first.click()
        page.wait_for_selector("#file-text")
        text = page.inner_text("#file-text")
        assert "<script>window.__pwned = 1</script>" in text
        assert "more characters" in text or "characters" in text  # the 5 MB line is cut
        assert len(text) < 100_000
        assert page.evaluate("window.__pwned") is None
        assert page.locator("script").count() == 1  # the page's own ui.js, nothing more
        assert page.locator("#panel img, #panel b, #events img, #events b").count() == 0
        page.screenshot(path=str(artifacts() / "ui-hostile.png"))
    finally:
        stop_ui(ui)


@pytest.mark.slow
def test_a_hostile_agent_or_model_name_is_inert_text(page: Any, tmp_path: Path) -> None:
    """The heading's agent and model come from the record as inert text, as every other
    field does: markup shows as the characters it is made of, escapes as `\\x1b`."""
    import asyncio
    import concurrent.futures

    from ctxoffload import Agent, LocalWorkspace, ScriptedModel

    name = '<img src=x onerror="window.__pwned = 3">\x1b[2J\u202eevil'

    async def run() -> None:
        agent = Agent(
            name=name,
            model=ScriptedModel(["done"], model_name="<b>model</b>\x1b]52;c;aGVsbG8=\x07"),
            offloader=LocalWorkspace(tmp_path / "ws"),
            session_id="named",
        )
        await agent.reply("hello")

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, run()).result()
    ui = start_ui(tmp_path / "ws")
    try:
        open_session(page, ui, "named")
        head = page.inner_text("#session-head")
        assert '<img src=x onerror="window.__pwned = 3">\\x1b[2J\\u202eevil' in head
        assert "<b>model</b>\\x1b]52;c;aGVsbG8=\\x07" in head
        assert not any(c in head for c in "\x1b\u202e\x07")
        assert page.locator("#session-head img, #session-head b").count() == 0
        assert page.evaluate("window.__pwned") is None
    finally:
        stop_ui(ui)


@pytest.mark.slow
def test_the_token_reaches_no_other_port_of_127_0_0_1(page: Any, ui: Ui) -> None:
    """A browser sends 127.0.0.1's cookies to every port of it: the token is in no cookie,
    so another local server the same browser visits receives nothing it could replay."""
    with plain_server() as other:
        open_session(page, ui)
        page.wait_for_selector("#live.on")
        page.click('.step[data-step="4"]')  # the page works: every request has the token
        page.wait_for_selector("#step-title")
        page.goto(other.url)
        second = page.context.new_page()
        second.goto(other.url + "favicon.ico")
        second.close()
        assert len(other.received) >= 2
        for headers in other.received:
            assert ui.token not in repr(headers), headers
        assert page.context.cookies() == []
        page.goto(ui.url + "#session=nightly-job")  # and the viewer still opens afterwards
        page.wait_for_selector(".step")
        page.wait_for_selector("#live.on")


@pytest.mark.slow
def test_no_storage_keeps_the_token_and_a_reload_still_works(page: Any, ui: Ui) -> None:
    """The page holds the token in its script's memory only: no cookie, no sessionStorage, no
    localStorage; a reload opens the same address, with the token, and works."""
    open_session(page, ui)
    page.wait_for_selector("#live.on")
    readable = page.evaluate(
        "() => JSON.stringify([{...sessionStorage}, {...localStorage}, document.cookie])"
    )
    assert ui.token not in readable
    page.reload()
    page.wait_for_selector(".step")
    page.wait_for_selector("#live.on")
    assert page.context.cookies() == []


@pytest.mark.slow
def test_two_viewers_on_two_ports_each_work(page: Any, ui: Ui, own_demo: Path) -> None:
    other = start_ui(own_demo)
    try:
        open_session(page, ui)
        second = page.context.new_page()
        open_session(second, other)
        for tab in (page, second):  # neither viewer's token stands in the other's way
            tab.reload()
            tab.wait_for_selector(".step")
            tab.wait_for_selector("#live.on")
        assert page.context.cookies() == []
    finally:
        stop_ui(other)


@pytest.mark.slow
def test_many_tabs_of_one_viewer_all_load_and_follow_live(page: Any, own_demo: Path) -> None:
    """Eight tabs: more than the six connections a browser opens to one host. They share one
    live stream, so every tab loads, and each sees a new session; when the tab holding the
    stream closes, another takes it over."""
    import shutil

    ui = start_ui(own_demo)
    try:
        tabs = [page] + [page.context.new_page() for _ in range(7)]
        for tab in tabs:
            open_session(tab, ui)
        for tab in tabs:
            tab.wait_for_selector("#live.on")
        sessions = own_demo / "sessions"
        shutil.copytree(sessions / "nightly-job", sessions / "added")
        for tab in tabs:
            tab.wait_for_selector('#sessions a[data-session="added"]')
        for tab in tabs[:4]:  # the first tab holds the stream
            tab.close()
        shutil.copytree(sessions / "nightly-job", sessions / "added-later")
        for tab in tabs[4:]:
            tab.wait_for_selector('#sessions a[data-session="added-later"]')
            assert tab.get_attribute("#live", "class") == "live on"
    finally:
        stop_ui(ui)


@pytest.mark.slow
def test_numbers_json_cannot_spell_show_as_a_dash(page: Any, odd_numbers: Path) -> None:
    """A record's NaN and Infinity (sent as those words) show as – and draw as nothing."""
    ui = start_ui(odd_numbers)
    try:
        open_session(page, ui, "odd-numbers")
        assert "window 4,000 tokens" in page.inner_text("#session-head")
        page.click('.step[data-step="1"]')
        page.wait_for_selector("#step-title")
        assert "– tokens counted" in page.inner_text("#step-title")
        # The bar is drawn to the scale of the numbers there are (the 12 tokens of messages).
        height = page.eval_on_selector(
            '.step .seg[data-part="messages"]', "seg => seg.getBoundingClientRect().height"
        )
        assert height > 100
    finally:
        stop_ui(ui)
