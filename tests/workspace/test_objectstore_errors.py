"""What ObjectStoreWorkspace says when the store cannot work: at once where retrying cannot
help, with the real cause, and never with a password.

Real servers on 127.0.0.1: moto's S3 (through a proxy that counts requests), a web page that
answers 200 to everything (a console's port taken for the API's), and a store that refuses
the credentials (403 AccessDenied).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from ctxoffload import ConfigError, ObjectStoreWorkspace, OffloadError, ToolResultBlock
from ctxoffload.cli import main
from s3_server import (
    ACCESS_DENIED,
    HTML_CONSOLE,
    SECRET_KEY,
    CannedServer,
    S3Server,
    ThrottlingProxy,
    free_port,
)

PASSWORD = "pw-do-not-print-7"


@pytest.fixture
def counting(s3: S3Server) -> Iterator[ThrottlingProxy]:
    proxy = ThrottlingProxy(s3)
    yield proxy
    proxy.stop()


@pytest.fixture
def console() -> Iterator[CannedServer]:
    server = CannedServer(200, "text/html; charset=utf-8", HTML_CONSOLE)
    yield server
    server.stop()


@pytest.fixture
def refusing() -> Iterator[CannedServer]:
    server = CannedServer(403, "application/xml", ACCESS_DENIED)
    yield server
    server.stop()


# -- a password in an endpoint URL -------------------------------------------------------


@pytest.mark.parametrize("variable", ["AWS_ENDPOINT_URL", "AWS_ENDPOINT"])
async def test_a_password_in_an_endpoint_variable_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, f"http://user:{PASSWORD}@127.0.0.1:{free_port()}")
    with pytest.raises(ConfigError) as caught:
        ws = ObjectStoreWorkspace(
            "s3://bucket1/p",
            region="us-east-1",
            access_key_id="AKIATESTONLY0000",
            secret_access_key=SECRET_KEY,
            deadline=0.5,
        )
        # Before the fix the workspace opened, and every error quoted the URL.
        await ws.offload_tool_result("s", ToolResultBlock(id="c", output="x"))
    message = str(caught.value)
    assert variable in message and PASSWORD not in message and "127.0.0.1" not in message


def test_a_password_in_the_endpoint_option_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        ObjectStoreWorkspace(
            "s3://bucket1/p", options={"aws_endpoint": f"http://u:{PASSWORD}@127.0.0.1:9"}
        )
    assert "aws_endpoint" in str(caught.value) and PASSWORD not in str(caught.value)


def test_store_messages_never_quote_the_userinfo_of_a_url() -> None:
    from ctxoffload.workspace._store_client import scrub

    text = (
        f"Error performing GET http://user:{PASSWORD}@127.0.0.1:9/b?list-type=2 in 1ms, "
        f"then https://{PASSWORD}@host/x and s3://k:{PASSWORD}@b/p"
    )
    scrubbed = scrub(text, ())
    assert PASSWORD not in scrubbed and "user:" not in scrubbed
    assert "http://***@127.0.0.1:9/b?list-type=2" in scrubbed


# -- URLs that are not accepted -----------------------------------------------------------


@pytest.mark.parametrize(
    "url", ["memory://agents/prod", "ftp://x/y", "s3://", "s3:///prefix", "gs://", "garbage://x"]
)
def test_an_unaccepted_url_says_which_urls_are_accepted(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        ObjectStoreWorkspace(url)
    message = str(caught.value)
    assert repr(url) in message
    assert "s3://BUCKET/PREFIX" in message and "memory://" in message
    assert "Debug" not in message and "Url {" not in message and len(message) < 400


@pytest.mark.parametrize(
    "deadline",
    [0, -1, float("inf"), float("nan"), 10**5000, 86_401, "30", True, None],
    ids=["0", "-1", "inf", "nan", "5001-digits", "a-day-and-a-second", "str", "bool", "None"],
)
def test_a_hostile_deadline_is_a_config_error_naming_the_range(deadline: object) -> None:
    with pytest.raises(ConfigError) as caught:
        ObjectStoreWorkspace("memory://", deadline=deadline)  # type: ignore[arg-type]
    assert "deadline=" in str(caught.value) and len(str(caught.value)) < 200


# -- errors that no retry can fix fail at once, with their cause ------------------------


async def test_a_missing_bucket_fails_at_the_first_answer_naming_it(
    counting: ThrottlingProxy,
) -> None:
    bucket = f"no-such-bucket-{uuid.uuid4().hex[:8]}"
    ws = ObjectStoreWorkspace(f"s3://{bucket}/p", **counting.workspace_kwargs(), deadline=600)
    for call in (
        ws.list_sessions,
        lambda: ws.offload_context("s", [{"role": "user", "content": "x"}]),
    ):
        before = counting.requests
        with pytest.raises(OffloadError) as caught:
            await call()
        message = str(caught.value)
        assert f"bucket {bucket!r} does not exist" in message, message
        assert "TimeoutError" not in message and "Debug" not in message
        assert counting.requests - before == 1  # not retried: no retry can create a bucket


async def test_refused_credentials_fail_at_the_first_answer(refusing: CannedServer) -> None:
    ws = ObjectStoreWorkspace("s3://bucket1/p", **refusing.workspace_kwargs(), deadline=600)
    with pytest.raises(OffloadError) as caught:
        await ws.list_sessions()
    message = str(caught.value)
    assert "AccessDenied" in message and "credentials" in message, message
    assert SECRET_KEY not in message and "TimeoutError" not in message
    assert refusing.requests == 1


async def test_an_endpoint_that_is_not_an_s3_api_is_an_error(console: CannedServer) -> None:
    ws = ObjectStoreWorkspace("s3://bucket1/p", **console.workspace_kwargs(), deadline=600)
    for call in (
        ws.list_sessions,
        lambda: ws.read_context("s"),
        lambda: ws.read_reference("sessions/s/tool_result-c.txt"),
    ):
        with pytest.raises(OffloadError) as caught:
            await call()
        message = str(caught.value)
        assert "not an S3 API endpoint" in message and console.endpoint_url in message, message


# -- the commands ---------------------------------------------------------------------------


def _env(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    for name, value in {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "AKIATESTONLY0000",
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": "us-east-1",
        "CTXOFFLOAD_DEADLINE": "600",
    }.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize(
    "args",
    [["ls"], ["verify"], ["grep", "x"], ["stats"], ["gc", "--older-than", "1d"]],
    ids=lambda a: a[0],
)
def test_commands_on_a_web_page_exit_2_naming_the_cause(
    console: CannedServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
) -> None:
    _env(monkeypatch, console.endpoint_url)
    code = main([*args, "--workdir", "s3://bucket1/p"])
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert len(err.strip().splitlines()) == 1 and "not an S3 API endpoint" in err, err


@pytest.mark.parametrize("args", [["ls"], ["grep", "x"], ["gc", "--older-than", "1d"]])
def test_commands_on_a_missing_bucket_exit_2_at_once(
    counting: ThrottlingProxy,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
) -> None:
    _env(monkeypatch, counting.endpoint_url)
    code = main([*args, "--workdir", "s3://nobucket/x"])
    _out, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "bucket 'nobucket' does not exist" in err and "TimeoutError" not in err
    assert counting.requests == 1
