"""The one masking rule (`ctxoffload._secrets`): a secret planted in a command line or a URL,
in any of the forms people write one, never appears in what ctxoffload shows of it, nor in
an error message that quotes it."""

from __future__ import annotations

import shlex
import urllib.parse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxoffload._secrets import MASK, Secrets, is_secret_name, masked_command, masked_url
from helpers import examples

# A secret is told apart from the rest of a command by its first characters (which no other
# part of the commands built here holds), so that finding it in the output means it leaked.
MARK = "Zq7"

SECRET_NAMES = [
    "key",
    "api-key",
    "api_key",
    "apikey",
    "apiKey",
    "X-Api-Key",
    "token",
    "auth-token",
    "access_token",
    "secret",
    "client_secret",
    "password",
    "passwd",
    "PGPASSWORD",
    "pass",
    "auth",
    "credential",
    "credentials",
    "access_key",
    "AWS_SECRET_ACCESS_KEY",
    "signature",
    "X-Amz-Signature",
    "sig",
]

any_secret = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=5,
    max_size=40,
).map(lambda s: MARK + s)
token_secret = st.text(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=", min_size=5
).map(lambda s: MARK + s)


def _command_forms(name: str, secret: str) -> list[list[str]]:
    """The ways a command line carries `secret` under the option or variable `name`."""
    return [
        ["python", "server.py", f"--{name}={secret}", "--port", "8080"],
        ["python", "server.py", f"--{name}", secret, "-v"],
        ["python", "server.py", f"-{name}", secret],
        ["env", f"{name.upper().replace('-', '_')}={secret}", "npx", "-y", "some-server"],
        ["curl", "-H", f"{name}: {secret}", "https://example.com/mcp"],
    ]


def _outputs(argv: list[str], secret: str) -> list[str]:
    """Everything that may show a command: its line for people, and messages quoting it (as
    written, shell-quoted, percent-encoded)."""
    secrets = Secrets.of_command(argv)
    quoted = [
        f"could not start {shlex.join(argv)}",
        f"FileNotFoundError: {argv!r}",
        f"failed: {' '.join(argv)} ({urllib.parse.quote(secret)})",
    ]
    return [masked_command(argv), *(secrets.mask(text) for text in quoted)]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_names_that_look_secret_are_secret(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["port", "verbose", "host", "url", "model", "path", "v"])
def test_plain_names_are_not(name: str) -> None:
    assert not is_secret_name(name)


@settings(max_examples=examples(300), deadline=None)
@given(secret=any_secret, name=st.sampled_from(SECRET_NAMES), form=st.integers(0, 4))
def test_a_secret_in_a_command_never_appears_in_any_output(
    secret: str, name: str, form: int
) -> None:
    argv = _command_forms(name, secret)[form]
    for shown in _outputs(argv, secret):
        assert secret not in shown, (argv, shown)
        assert shlex.quote(secret) not in shown, (argv, shown)


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None)
@given(
    secret=any_secret,
    name=st.sampled_from(SECRET_NAMES),
    where=st.sampled_from(["password", "user", "query", "fragment", "nested"]),
)
def test_a_secret_in_a_url_never_appears_in_any_output(secret: str, name: str, where: str) -> None:
    encoded = urllib.parse.quote(secret, safe="")
    url = {
        "password": f"https://alice:{encoded}@mcp.example.com:8443/mcp",
        "user": f"https://{encoded}@mcp.example.com/mcp",
        "query": f"https://mcp.example.com/mcp?mode=fast&{name}={encoded}&x=1",
        "fragment": f"https://mcp.example.com/mcp#{name}={encoded}",
        "nested": f"https://proxy.example.com/?target=postgresql://u:{encoded}@db/x",
    }[where]
    secrets = Secrets.of_url(url)
    shown = [
        masked_url(url),
        secrets.mask(f"Client error '401 Unauthorized' for url '{url}'"),
        secrets.mask(f"invalid URL: {urllib.parse.unquote(url)!r}"),
        masked_command(["ctxoffload", "mcp-proxy", "--url", url]),
    ]
    for text in shown:
        assert secret not in text and encoded not in text, (url, text)


@pytest.mark.slow
@settings(max_examples=examples(200), deadline=None)
@given(token=token_secret)
def test_a_bearer_token_is_masked_in_an_argument_and_in_any_text(token: str) -> None:
    argv = ["npx", "mcp-remote", "https://h/mcp", "--header", f"Authorization: Bearer {token}"]
    assert token not in masked_command(argv)
    assert token not in Secrets().mask(f"sent Authorization: Bearer {token}, got 401")
    assert token not in Secrets().mask(f"headers={{'authorization': 'Bearer {token}'}}")


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["mysql", "-uroot", "-ps3cretpw", "db"], "mysql -uroot '-p***' db"),
        (["sshpass", "-p", "s3cretpw", "ssh", "host"], "sshpass -p '***' ssh host"),
        (["redis-cli", "-a", "s3cretpw", "ping"], "redis-cli -a '***' ping"),
        # `-p` of any other program is a port or a path: shown as it is.
        (["python", "server.py", "-p", "8080"], "python server.py -p 8080"),
        (["ssh", "-p", "2222", "host"], "ssh -p 2222 host"),
    ],
)
def test_dash_p_is_a_password_only_where_it_is_one(argv: list[str], shown: str) -> None:
    assert masked_command(argv) == shown


def test_what_is_not_secret_stays_readable() -> None:
    argv = ["uvx", "mcp-server-git", "--repository", "/src/repo", "--url", "https://h:8443/x?a=1"]
    assert masked_command(argv) == shlex.join(argv)
    url = "postgresql://alice:pw-is-here@db.internal:5432/agents?sslmode=require"
    assert masked_url(url) == f"postgresql://{MASK}@db.internal:5432/agents?sslmode=require"


def test_a_short_known_secret_is_masked_where_it_is_not_wherever_it_occurs() -> None:
    secrets = Secrets.of_command(["server", "--token", "ab1"])
    assert masked_command(["server", "--token", "ab1"]) == "server --token '***'"
    # Elsewhere in a message, three characters are too common to replace blindly.
    assert secrets.mask("tab1 at line 3") == "tab1 at line 3"


def test_a_password_with_an_unencoded_at_sign_is_masked_whole() -> None:
    # URL parsers take the last `@` before the host as the end of the user part.
    assert masked_url("http://u:p@ss-Zq7@127.0.0.1:8/mcp") == "http://***@127.0.0.1:8/mcp"


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        # docker's spelling: the option is `env`, the secret is the inner assignment's value.
        (
            ["docker", "run", "--env=GITHUB_TOKEN=ghp_Zq7a", "-e", "API_KEY=Zq7b", "img"],
            "docker run '--env=GITHUB_TOKEN=***' -e 'API_KEY=***' img",
        ),
        (["server", "--pat", "Zq7c"], "server --pat '***'"),
        (
            ["server", "--config", '{"apiKey": "Zq7d", "model": "m"}'],
            'server --config \'{"apiKey": "***", "model": "m"}\'',
        ),
        # A command line given as one argument is read as one, short secrets included.
        (
            ["sh", "-c", "exec server --token Z --pat Zq7e"],
            "sh -c 'exec server --token *** --pat ***'",
        ),
        (
            ["bash", "-lc", "GITHUB_TOKEN=Zq7f exec srv --url https://u:Zq7g@h/x"],
            "bash -lc 'GITHUB_TOKEN=*** exec srv --url https://***@h/x'",
        ),
        # A sentence is no command to mask; nothing in it is secret.
        (["srv", "--motd", "hello big world"], "srv --motd 'hello big world'"),
    ],
)
def test_the_shapes_a_wrapped_command_hides_its_secrets_in_are_masked(
    argv: list[str], shown: str
) -> None:
    assert masked_command(argv) == shown
    secrets = Secrets.of_command(argv)
    # A message quoting the command as written shows none of its secrets of four or more
    # characters (a shorter one is masked where a pattern finds it).
    assert "Zq7" not in secrets.mask(f"could not start {shlex.join(argv)}")


@pytest.mark.slow
@settings(max_examples=examples(200), deadline=None)
@given(secret=token_secret, name=st.sampled_from(SECRET_NAMES), quote=st.sampled_from("\"'"))
def test_a_secret_in_a_quoted_field_or_a_nested_assignment_never_appears(
    secret: str, name: str, quote: str
) -> None:
    texts = [
        f"{{{quote}{name}{quote}: {quote}{secret}{quote}}}",
        f"--env={name.upper()}={secret}",
        f"--set=outer={name}={secret}",
    ]
    for text in texts:
        assert secret not in Secrets().mask(text), text
        assert secret not in masked_command(["srv", text]), text
        assert secret not in masked_command(["sh", "-c", f"exec srv {shlex.quote(text)}"]), text


def test_nested_assignments_cost_linear_time_on_a_hostile_text() -> None:
    # `a=a=a=...`: each level of nesting is read once, a few levels deep, not once per `=`.
    # Read all the way down, this would take minutes (100,000 levels of 200,000 characters).
    text = "a=" * 100_000 + "token=Zq7h"
    assert Secrets().mask(text).startswith("a=a=")
    assert Secrets().mask("a=b=token=Zq7i") == "a=b=token=***"
