"""A campaign's pinned tokenizer: a local `tokenizer.json` (Hugging Face `tokenizers` format), by digest.

`generate: {tokenizer: PATH}` names a file or a folder holding `tokenizer.json`; node/ reads its bytes
beside the campaign file, as it reads prompts files. The pin is its name and sha256 (the revision a
row's `TokenSource` names: `tokenizer:<name>@<first 12 hex>`), and the file itself zlib-compressed
for the worker that counts a server's output with it (`drivers.endpoint.tokencount`, in a child). On the
submitter it builds random datasets (`scheduler.language.dataset`): the bytes are parsed by the `tokenizers`
library (no code runs; the file is bounded by `MAX_TOKENIZER_FILE`), imported only when a campaign
pins one. Pure like the rest of `protocol`: the submitter and the worker share it.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final, TypeVar

from protocol.generation import MAX_TOKENIZER_BYTES, TokenizerPin

if TYPE_CHECKING:
    from tokenizers import Tokenizer

MAX_TOKENIZER_FILE: Final = 32 << 20
MAX_VOCABULARY: Final = 1 << 20
"""Tokens a pinned tokenizer may have: four times the largest published vocabularies (about 256k);
loading and scanning 2,000,000 took 20 s and 770 MiB."""
FOLDER_FILE: Final = "tokenizer.json"
T = TypeVar("T")


class TokenizerError(ValueError):
    """The tokenizer cannot be pinned or read; the message says why (a campaign problem)."""


def pin(name: str, data: bytes) -> TokenizerPin:
    """The pin of a tokenizer.json's bytes, carrying them compressed when an offer can hold them
    (`MAX_TOKENIZER_BYTES`); a larger one is pinned by digest only: it still makes the submitter's
    datasets, and workers count a server's output per chunk, as the rows then say."""
    packed = zlib.compress(data, 9)
    if len(packed) > MAX_TOKENIZER_BYTES:
        packed = b""
    label = name.rstrip("/").rsplit("/", 1)[-1] or name
    return TokenizerPin(name=label[:128], sha256=hashlib.sha256(data).hexdigest(), data=packed)


def unpack(pin: TokenizerPin) -> bytes:
    """The tokenizer.json bytes a pin carries, inflated no further than `MAX_TOKENIZER_FILE`.

    Raises:
        TokenizerError: the data is not zlib, inflates past the bound, or does not match its digest.
    """
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(pin.data, MAX_TOKENIZER_FILE)
    except zlib.error as exc:
        raise TokenizerError(f"{pin.name}: not zlib data ({exc})") from exc
    if inflater.unconsumed_tail or not inflater.eof:
        raise TokenizerError(f"{pin.name}: inflates past {MAX_TOKENIZER_FILE} bytes, or is cut")
    if hashlib.sha256(data).hexdigest() != pin.sha256:
        raise TokenizerError(f"{pin.name}: its bytes do not match its sha256")
    return data


class Pinned:
    """A pinned tokenizer, loaded: what `scheduler.language.dataset.Vocabulary` asks for.

    Bounded before and after parsing: at most `MAX_TOKENIZER_FILE` bytes and `MAX_VOCABULARY` tokens
    (the library's cost grows with both). The library's own failures, a Rust panic included (pyo3's
    `PanicException` is a BaseException, raised for instance when a pre-tokenizer regex backtracks past
    Oniguruma's retry limit), come out as `TokenizerError` naming the file and the stage.
    """

    def __init__(self, data: bytes, name: str) -> None:
        self.name = name
        if len(data) > MAX_TOKENIZER_FILE:
            raise TokenizerError(
                f"{name}: {len(data)} bytes, over the limit of {MAX_TOKENIZER_FILE} bytes for a tokenizer"
            )
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise TokenizerError(f"{name}: reading a tokenizer needs the tokenizers package ([llm])") from exc
        self._tokenizer: Tokenizer = self._guarded(
            "not a tokenizer.json", lambda: Tokenizer.from_str(data.decode("utf-8"))
        )
        self._tokenizer.no_padding()  # counts are of the text's own tokens: a file's padding or
        self._tokenizer.no_truncation()  # truncation would change them (and padding can ask for gigabytes)
        size = self._guarded("reading its vocabulary", self._tokenizer.get_vocab_size)
        if size > MAX_VOCABULARY:
            raise TokenizerError(
                f"{name}: {size} tokens, over the limit of {MAX_VOCABULARY} tokens for a tokenizer"
            )
        self._plain: list[int] | None = None

    def _guarded(self, stage: str, call: Callable[[], T]) -> T:
        """`call`, with the library's failures (a panic too) as a TokenizerError naming `stage`."""
        try:
            return call()
        except Exception as exc:  # the library's errors are plain Exceptions (and UnicodeDecodeError)
            raise TokenizerError(f"{self.name}: {stage} ({_first_line(exc)})") from None
        except BaseException as exc:
            if type(exc).__name__ != "PanicException":
                raise
            raise TokenizerError(
                f"{self.name}: {stage}: the tokenizers library panicked ({_first_line(exc)})"
            ) from None

    def encode(self, text: str) -> list[int]:
        ids = self._guarded("encoding", lambda: self._tokenizer.encode(text, add_special_tokens=False).ids)
        return list(ids)

    def decode(self, ids: Sequence[int]) -> str:
        return str(
            self._guarded("decoding", lambda: self._tokenizer.decode(list(ids), skip_special_tokens=True))
        )

    def plain_ids(self) -> list[int]:
        if self._plain is None:
            special = set(self._tokenizer.get_added_tokens_decoder())
            size = self._tokenizer.get_vocab_size()
            texts = self._guarded(
                "decoding its vocabulary", lambda: self._tokenizer.decode_batch([[i] for i in range(size)])
            )
            self._plain = [i for i, text in enumerate(texts) if i not in special and _plain(text)]
        return self._plain


def _plain(text: str) -> bool:
    return bool(text.strip()) and text.isprintable() and "\ufffd" not in text


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]
