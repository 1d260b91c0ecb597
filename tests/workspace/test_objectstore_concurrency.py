"""Many processes, each with its own client, writing one session of one bucket at once."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from s3_server import S3Server, shared_server

from ctxoffload import ObjectStoreWorkspace

SpawnPython = Callable[..., "subprocess.Popen[str]"]

CHILD_PRELUDE = """
import asyncio, faulthandler, json, sys
faulthandler.enable()
from ctxoffload import ObjectStoreWorkspace, Msg, TextBlock, ToolResultBlock, DataBlock
from ctxoffload.messages import Base64Source
args = json.loads(sys.argv[1])
ws = ObjectStoreWorkspace(args["url"], **args["kwargs"], writer_id=f"child-{args['n']}")
"""

CONTENDED_APPENDS = 200

APPENDS = (
    CHILD_PRELUDE
    + """
async def main():
    acknowledged = []
    for i in range(args["count"]):
        text = f"writer {args['n']} message {i}"
        msgs = [Msg(role="user", content=[TextBlock(text=text)])]
        if i % 10 == 0:
            msgs.append(Msg(role="assistant", content=[TextBlock(text=text + " reply")]))
        ref = await ws.offload_context("shared", msgs)
        acknowledged.append([ref.first_line, ref.last_line, text])
    print(json.dumps(acknowledged))
asyncio.run(main())
"""
)

TOOL_RESULT = (
    CHILD_PRELUDE
    + """
async def main():
    output = "same output\\n" * 100 if args["n"] % 2 else f"output of writer {args['n']}\\n"
    result = ToolResultBlock(id="call_1", name="t", output=output)
    ref = await ws.offload_tool_result("shared", result)
    print(json.dumps([ref, output]))
asyncio.run(main())
"""
)

IMAGE = (
    CHILD_PRELUDE
    + """
async def main():
    block = DataBlock(source=Base64Source(data=args["png"], media_type="image/png"))
    stored = await ws.offload_data_block(block)
    print(json.dumps(stored.source.url))
asyncio.run(main())
"""
)


@pytest.fixture(scope="session")
def s3() -> S3Server:
    return shared_server()


def run_children(spawn_python: SpawnPython, code: str, processes: int, **fields: Any) -> list[Any]:
    children = [spawn_python(code, json.dumps({**fields, "n": n})) for n in range(processes)]
    results = []
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
        results.append(json.loads(out))
    return results


def test_concurrent_appends_from_8_processes_lose_no_line(
    s3: S3Server, spawn_python: SpawnPython
) -> None:
    url = f"s3://{s3.new_bucket()}/fleet"
    results = run_children(
        spawn_python, APPENDS, 8, url=url, kwargs=s3.workspace_kwargs(), count=CONTENDED_APPENDS
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


def test_concurrent_tool_results_with_one_id_are_never_overwritten(
    s3: S3Server, spawn_python: SpawnPython
) -> None:
    url = f"s3://{s3.new_bucket()}/fleet"
    results = run_children(spawn_python, TOOL_RESULT, 8, url=url, kwargs=s3.workspace_kwargs())
    ws = ObjectStoreWorkspace(url, **s3.workspace_kwargs())
    for ref, output in results:
        assert asyncio.run(ws.read_reference(ref)) == output.encode()
    refs = [ref for ref, _ in results]
    # The four writers of the same output share one object; the four others get one each.
    assert len(set(refs)) == 5
    assert sorted(asyncio.run(ws.list_files("shared"))) == sorted(set(refs))


def test_the_same_image_from_20_processes_is_one_object(
    s3: S3Server, spawn_python: SpawnPython
) -> None:
    url = f"s3://{s3.new_bucket()}/fleet"
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 64
    results = run_children(
        spawn_python,
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
