"""Many processes, each with its own client, writing one session of one bucket at once."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxoffload import ObjectStoreWorkspace
from s3_server import S3Server

SpawnPython = Callable[..., "subprocess.Popen[str]"]

# A zygote: imports ctxoffload once, then forks one writer per process wanted. Each writer
# makes its own workspace (its own client and connections), says "ready", and waits at a
# barrier that the test releases once all are ready, so every writer races from its first
# request. (Started as interpreters one after another, the first writers could finish before
# the last had imported anything; forking makes a writer cost milliseconds instead of an
# interpreter start-up. The zygote has no threads and no client before it forks.) A writer
# leaves what `write(ws, n)` returns in `<out>/<n>.json`; the zygote exits with 0 only if
# every writer did.
ZYGOTE = """
import asyncio, faulthandler, json, os, sys, traceback
faulthandler.enable()
from ctxoffload import ObjectStoreWorkspace, Msg, TextBlock, ToolResultBlock, DataBlock
from ctxoffload.messages import Base64Source
args = json.loads(sys.argv[1])

{write}

go_read, go_write = os.pipe()
writers = []
for n in range(args["processes"]):
    pid = os.fork()
    if pid == 0:
        status, ready = 1, False
        try:
            os.close(go_write)
            ws = ObjectStoreWorkspace(args["url"], **args["kwargs"], writer_id=f"child-{{n}}")
            os.write(1, b"ready\\n")  # one write: the writers share the pipe
            ready = True
            os.read(go_read, 1)  # end of file once the test says go: every writer starts
            result = asyncio.run(write(ws, n))
            with open(os.path.join(args["out"], f"{{n}}.json"), "w") as f:
                json.dump(result, f)
            status = 0
        except BaseException:
            traceback.print_exc()
            if not ready:
                os.write(1, b"failed\\n")
        finally:
            os._exit(status)
    writers.append(pid)
os.close(go_read)
sys.stdin.readline()
os.close(go_write)
failed = [(n, os.waitpid(pid, 0)[1]) for n, pid in enumerate(writers)]
failed = [(n, status) for n, status in failed if status != 0]
if failed:
    sys.exit(f"writers that failed (number, wait status): {{failed}}")
"""

CONTENDED_APPENDS = 20

APPENDS = """
async def write(ws, n):
    acknowledged = []
    for i in range(args["count"]):
        text = f"writer {n} message {i}"
        msgs = [Msg(role="user", content=[TextBlock(text=text)])]
        if i % 10 == 0:
            msgs.append(Msg(role="assistant", content=[TextBlock(text=text + " reply")]))
        ref = await ws.offload_context("shared", msgs)
        acknowledged.append([ref.first_line, ref.last_line, text])
    return acknowledged
"""

TOOL_RESULT = """
async def write(ws, n):
    output = "same output\\n" * 100 if n % 2 else f"output of writer {n}\\n"
    result = ToolResultBlock(id="call_1", name="t", output=output)
    ref = await ws.offload_tool_result("shared", result)
    return [ref, output]
"""

IMAGE = """
async def write(ws, n):
    block = DataBlock(source=Base64Source(data=args["png"], media_type="image/png"))
    stored = await ws.offload_data_block(block)
    return stored.source.url
"""


def run_writers(
    spawn_python: SpawnPython, out: Path, write: str, processes: int, **fields: Any
) -> list[Any]:
    """Run `processes` writers of `write` at once; returns what each returned, in order."""
    fields = {**fields, "processes": processes, "out": str(out)}
    zygote = spawn_python(ZYGOTE.format(write=write), json.dumps(fields))
    assert zygote.stdin is not None and zygote.stdout is not None
    for _ in range(processes):
        line = zygote.stdout.readline()
        if line != "ready\n":
            zygote.kill()
            raise AssertionError(f"a writer did not start: {line!r}\n{zygote.communicate()[1]}")
    _, err = zygote.communicate("go\n", timeout=300)
    assert zygote.returncode == 0, err
    return [json.loads((out / f"{n}.json").read_text()) for n in range(processes)]


@pytest.mark.slow
def test_concurrent_appends_from_8_processes_lose_no_line(
    s3: S3Server, spawn_python: SpawnPython, tmp_path: Path
) -> None:
    """8 writers x 20 appends, all started at once, into one log.

    20 appends each rather than 200: the writers leave a barrier together, so all 160
    appends are raced (each loses a seq to another writer again and again), and the log
    still passes TAIL_EVERY (64) twice. The starvation this test was written for (a writer
    that re-read the winner's metadata before each retry stayed one request behind: at
    8 x 200 one gave up after 319 losses) is caught at this size by counting the segments
    the others wrote while a writer waited: with that retry loop, in every run some writer
    here waited through 50 to 140 of them; now none waits through more than 9.
    """
    url = f"s3://{s3.new_bucket()}/fleet"
    results = run_writers(
        spawn_python,
        tmp_path,
        APPENDS,
        8,
        url=url,
        kwargs=s3.workspace_kwargs(),
        count=CONTENDED_APPENDS,
    )
    ws = ObjectStoreWorkspace(url, **s3.workspace_kwargs())
    rows = asyncio.run(ws.read_context("shared"))
    expected_lines = sum(last - first + 1 for acks in results for first, last, _ in acks)
    assert len(rows) == expected_lines == 8 * (CONTENDED_APPENDS + CONTENDED_APPENDS // 10)
    for acks in results:
        for first, last, text in acks:
            assert rows[first - 1]["content"][0]["text"] == text
            if last > first:
                assert rows[last - 1]["content"][0]["text"] == text + " reply"
    texts = [r["content"][0]["text"] for r in rows]
    assert len(set(texts)) == len(texts)
    segments = asyncio.run(ws._logs.segments("sessions/shared/context.jsonl"))
    assert [seq for seq, _ in segments] == list(range(8 * CONTENDED_APPENDS))
    # No writer starves: while one waits for its next append, the 7 others write a few
    # segments each (at most 4 on average here), not everything they have to write. Each
    # append is one segment, so an append's rank by first line is its seq.
    order = sorted((first, n) for n, acks in enumerate(results) for first, _, _ in acks)
    seqs_of: dict[int, list[int]] = {}
    for seq, (_, n) in enumerate(order):
        seqs_of.setdefault(n, []).append(seq)
    for n, seqs in seqs_of.items():
        previous = [-1, *seqs[:-1]]
        waited = [seq - before - 1 for before, seq in zip(previous, seqs, strict=True)]
        assert max(waited) <= 4 * 7, f"writer {n} waited through {waited} segments"


@pytest.mark.slow
def test_concurrent_tool_results_with_one_id_are_never_overwritten(
    s3: S3Server, spawn_python: SpawnPython, tmp_path: Path
) -> None:
    url = f"s3://{s3.new_bucket()}/fleet"
    results = run_writers(
        spawn_python, tmp_path, TOOL_RESULT, 8, url=url, kwargs=s3.workspace_kwargs()
    )
    ws = ObjectStoreWorkspace(url, **s3.workspace_kwargs())
    for ref, output in results:
        assert asyncio.run(ws.read_reference(ref)) == output.encode()
    refs = [ref for ref, _ in results]
    # The four writers of the same output share one object; the four others get one each.
    assert len(set(refs)) == 5
    assert sorted(asyncio.run(ws.list_files("shared"))) == sorted(set(refs))


@pytest.mark.slow
def test_the_same_image_from_20_processes_is_one_object(
    s3: S3Server, spawn_python: SpawnPython, tmp_path: Path
) -> None:
    url = f"s3://{s3.new_bucket()}/fleet"
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 64
    results = run_writers(
        spawn_python,
        tmp_path,
        IMAGE,
        20,
        url=url,
        kwargs=s3.workspace_kwargs(),
        png=base64.b64encode(png).decode(),
    )
    expected = f"{url}/data/{hashlib.sha256(png).hexdigest()}.png"
    assert set(results) == {expected}
    ws = ObjectStoreWorkspace(url, **s3.workspace_kwargs())
    objects = asyncio.run(ws._client.list_objects("data"))
    assert [o.key for o in objects] == [expected[len(url) + 1 :]]
    assert asyncio.run(ws.read_reference(expected)) == png
