"""Blocking work off the loop (`off_loop`): in a worker thread on any loop a host may run, and
inline only on loops whose caller waits for it (a `CallerLoop`'s, the projector's; a
`LoopThread(inline_io=True)`'s; `run_private`'s). A sync host's projections run on the host's
own thread, with no hop to a loop thread or a worker thread for their files, and sessions
projected side by side from the host's threads still lose nothing."""

from __future__ import annotations

import asyncio
import contextvars
import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import ContextConfig, LocalWorkspace, Msg
from ctxoffload._loop import CallerLoop, LoopThread, off_loop, off_loop_long, run_private
from ctxoffload.compression import Projector


async def _where() -> tuple[int, int]:
    """The thread the loop runs on and the one `off_loop` ran the work on."""
    return threading.get_ident(), await off_loop(threading.get_ident)


def _disk_full_reaches_the_caller(runner: LoopThread | CallerLoop) -> None:
    """Blocking work run through `runner` fails as a full disk does: the caller gets the
    error."""

    def fail() -> None:
        raise OSError(28, "No space left on device")

    async def call() -> None:
        await off_loop(fail)

    try:
        runner.run(call())
    except OSError as exc:
        assert exc.errno == 28
    else:  # pragma: no cover - the error must reach the caller
        raise AssertionError("the work's error was lost")


def test_blocking_work_leaves_a_host_loop_and_a_plain_loop_thread() -> None:
    loop_thread, worker = asyncio.run(_where())
    assert worker != loop_thread
    loop_thread, worker = LoopThread("plain").run(_where())
    assert worker != loop_thread


def test_blocking_work_runs_inline_on_an_inline_loop_thread_and_raises_there() -> None:
    inline = LoopThread("inline", inline_io=True)
    loop_thread, worker = inline.run(_where())
    assert worker == loop_thread != threading.get_ident()

    _disk_full_reaches_the_caller(inline)
    # The loop serves on after the error.
    assert inline.run(_where())[1] != threading.get_ident()


def test_sync_code_run_on_a_private_loop_does_its_blocking_work_inline() -> None:
    # (A deepagents backend's, a Strands storage's or a LangChain reading tool's sync call.)
    loop_thread, worker = run_private(_where())
    assert worker == loop_thread == threading.get_ident()
    # A loop of its own each time; a host's loop afterwards is not taken for one.
    loop_thread, worker = asyncio.run(_where())
    assert worker != loop_thread


@pytest.mark.slow
def test_a_sync_host_projects_without_a_worker_thread_for_its_files(tmp_path: Path) -> None:
    # In a fresh interpreter: the default executor's threads are named asyncio_N.
    program = textwrap.dedent(
        f"""
        import threading
        from ctxoffload import ContextConfig, LocalWorkspace, Msg
        from ctxoffload.compression import Projector

        workspace = LocalWorkspace({str(tmp_path)!r})
        projector = Projector(workspace, "s1", config=ContextConfig(context_window=3000))
        history = []
        for i in range(40):
            history += [Msg(role="user", content=f"step {{i}}: " + "log line\\n" * 60),
                        Msg(role="assistant", content=f"done {{i}}")]
            projector.project_sync(history)
        print(sorted(t.name for t in threading.enumerate() if t.name != "MainThread"))
        """
    )
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    # No worker thread for its files, and no loop thread: the host's thread ran it all.
    assert out.stdout.strip() == "[]"
    lines = (tmp_path / "sessions" / "s1" / "events.jsonl").read_text().splitlines()
    kinds = [json.loads(line)["kind"] for line in lines]
    # Every call recorded, and the history compacted on the way (its files written inline).
    assert kinds.count("model_call") == 40
    assert "compression" in kinds


def test_sessions_projected_side_by_side_from_host_threads_keep_every_call(
    tmp_path: Path,
) -> None:
    workspace = LocalWorkspace(tmp_path)
    config = ContextConfig(context_window=3000)
    calls = 30

    def host(session: str) -> None:
        projector = Projector(workspace, session, config=config)
        history: list[Msg] = []
        for i in range(calls):
            history += [
                Msg(role="user", content=f"{session} step {i}: " + "output row\n" * 80),
                Msg(role="assistant", content=f"{session} read {i}"),
            ]
            projector.project_sync(history)

    threads = [threading.Thread(target=host, args=(f"s{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    async def check() -> None:
        for n in range(4):
            events = await workspace.read_events(f"s{n}")
            steps = [e["step"] for e in events if e["kind"] == "model_call"]
            assert steps == list(range(1, calls + 1))
            # Every message that left the context is in context.jsonl, once.
            left = [m["id"] for m in await workspace.read_context(f"s{n}")]
            assert left and len(left) == len(set(left))

    asyncio.run(check())


_CALLER = contextvars.ContextVar("_CALLER", default="none")


async def _seen() -> tuple[int, int, str, asyncio.AbstractEventLoop]:
    """The thread the coroutine runs on, the one `off_loop` ran the work on, the caller's
    context variable as the work sees it, and the loop."""
    return (
        threading.get_ident(),
        await off_loop(threading.get_ident),
        _CALLER.get(),
        asyncio.get_running_loop(),
    )


def test_a_caller_loop_runs_on_the_calling_thread_and_on_one_loop() -> None:
    runner = CallerLoop("caller")
    _CALLER.set("the host's tracing")
    here = threading.get_ident()
    ran_on, worked_on, seen, loop = runner.run(_seen())
    assert ran_on == worked_on == here
    assert seen == "none"  # the caller's context variables do not reach the work

    # Another host thread: its own thread runs it, on the same loop.
    found: list[tuple[int, int, str, asyncio.AbstractEventLoop]] = []
    other = threading.Thread(target=lambda: found.append(runner.run(_seen())))
    other.start()
    other.join()
    assert found[0][0] == found[0][1] == other.ident and found[0][3] is loop

    # Sync code called from a coroutine (a sync hook inside an async host): a loop runs on
    # that thread, so the work runs on the same loop on a thread of the runner's own, and
    # the host's loop is not blocked for longer than the caller waits.
    async def host() -> tuple[int, int, str, asyncio.AbstractEventLoop]:
        return runner.run(_seen())

    ran_on, worked_on, _, again = asyncio.run(host())
    assert ran_on == worked_on != here and again is loop

    # An error reaches the caller, and the loop serves on.
    _disk_full_reaches_the_caller(runner)
    assert runner.run(_seen())[3] is loop


def test_host_threads_sharing_one_projector_take_turns_and_keep_every_call(
    tmp_path: Path,
) -> None:
    # Four threads project the same session through one projector at once (a host running
    # graph branches in parallel): each call is answered and recorded; none is lost.
    workspace = LocalWorkspace(tmp_path)
    projector = Projector(workspace, "shared", config=ContextConfig(context_window=3000))
    history = [
        Msg(role="user" if i % 2 == 0 else "assistant", content=f"turn {i}: " + "row\n" * 60)
        for i in range(60)
    ]
    errors: list[BaseException] = []

    def host(offset: int) -> None:
        try:
            for i in range(2 + offset, len(history), 4):
                projector.project_sync(history[: i + 1])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=host, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors

    async def check() -> None:
        events = await workspace.read_events("shared")
        steps = [e["step"] for e in events if e["kind"] == "model_call"]
        assert len(steps) == sum(len(range(2 + n, 60, 4)) for n in range(4))
        left = [m["id"] for m in await workspace.read_context("shared")]
        assert len(left) == len(set(left))

    asyncio.run(check())


def run_program(tmp_path: Path, program: str) -> subprocess.CompletedProcess[str]:
    """`program` run as a user's script in a fresh interpreter, what it printed kept."""
    script = tmp_path / "program.py"
    script.write_text(program, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )


def test_a_timer_due_while_the_interpreter_exits_says_nothing(tmp_path: Path) -> None:
    """A timer (`LoopThread.later`: the LangChain door's idle release of a lease) that came
    due after the interpreter shut its executors down printed "Exception in callback ...
    cannot schedule new futures after shutdown" at the end of the user's program."""
    done = run_program(
        tmp_path,
        "import asyncio, atexit, time\n"
        "from ctxoffload._loop import LoopThread\n"
        "loop = LoopThread('late')\n"
        "loop.run(asyncio.sleep(0))\n"
        "atexit.register(time.sleep, 0.6)  # the exit takes a while after the executors stop\n"
        "loop.later(0.2, lambda: None)\n",
    )
    assert done.returncode == 0, done.stderr
    assert "Exception in callback" not in done.stderr and "Traceback" not in done.stderr


def test_a_task_left_on_a_collected_loop_thread_ends_without_a_word(tmp_path: Path) -> None:
    """A lease's renewal task sleeps on the loop of the door object that took it; when that
    object was collected with the lease unreleased, the task was destroyed pending with the
    loop and printed "Task was destroyed but it is pending!" at the host's exit (seen in CI's
    host runs). The loop's thread now cancels what is left before it closes the loop."""
    done = run_program(
        tmp_path,
        "import asyncio, gc, threading\n"
        "from ctxoffload._loop import LoopThread\n"
        "loop = LoopThread('keeps')\n"
        "async def start():\n"
        "    asyncio.get_running_loop().create_task(asyncio.sleep(3600))  # a renewal's beat\n"
        "loop.run(start())\n"
        "del loop\n"
        "gc.collect()\n"
        "for thread in threading.enumerate():\n"
        "    if thread.name == 'keeps':\n"
        "        thread.join(30)\n"
        "        assert not thread.is_alive()\n"
        "print('ended')\n",
    )
    assert done.returncode == 0 and done.stdout == "ended\n", done.stderr
    assert done.stderr == ""


@pytest.mark.slow
def test_a_loop_keeps_nothing_of_the_context_its_first_caller_ran_in() -> None:
    """A door's hooks serve one request after another with one loop. The loop's wake-up
    reader kept a copy of the context it was made in, so the first request's context
    variables (CrewAI's runtime state with that request's crew, agent and model) lived as
    long as the hooks: a request's objects are let go once the request is done, the loop
    still there. A timer set from a request keeps nothing of it either."""
    import gc
    import weakref

    class Crew:
        pass

    state: contextvars.ContextVar[Crew] = contextvars.ContextVar("runtime_state")

    async def work() -> str:
        await asyncio.sleep(0)
        return "done"

    for runner in (CallerLoop("test-caller"), LoopThread("test-loop")):
        held: list[weakref.ref[Crew]] = []

        def request(runner: CallerLoop | LoopThread = runner, held: list[Any] = held) -> None:
            crew = Crew()
            state.set(crew)
            held.append(weakref.ref(crew))
            assert runner.run(work()) == "done"
            if isinstance(runner, LoopThread):
                runner.later(3600, lambda: None)

        for _ in range(3):
            contextvars.copy_context().run(request)
        gc.collect()
        assert [ref() for ref in held] == [None, None, None], type(runner).__name__
        assert runner.run(work()) == "done"  # the loop is still there


async def _where_long() -> tuple[int, int]:
    """The thread the loop runs on and the one `off_loop_long` ran the work on."""
    return threading.get_ident(), await off_loop_long(threading.get_ident)


def test_long_blocking_work_runs_inline_only_where_the_caller_waits_for_all() -> None:
    # A sync model's call: on a CallerLoop the caller's own thread runs it; on a projector's
    # LoopThread (inline_io: a background summary shares its loop with the next calls) and
    # on any other loop, a worker thread does, and the loop stays free.
    loop, work = CallerLoop("t").run(_where_long())
    assert loop == work == threading.get_ident()
    loop, work = LoopThread("t", inline_io=True).run(_where_long())
    assert loop != work
    loop, work = asyncio.run(_where_long())
    assert loop != work
