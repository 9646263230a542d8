"""The SSE decoder and chunk reader: any split of the bytes gives the same events; faults are kinds."""

from __future__ import annotations

import json

import pytest

from drivers.endpoint.sse import Chunk, SseDecoder, SseEvent, StreamFault, Usage, read_chunk


def _delta(text: str) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}, ensure_ascii=False)


SEPARATED = "line\u2028sep"
# Multi-byte UTF-8 (é, 🙂), a JSON string holding U+2028 (not a line end in SSE), CRLF and CR line
# ends, a comment (keep-alive), an `event:` and an `id:` field, a multi-line data field.
STREAM = (
    ": keep-alive\r\n\r\n"
    f"data: {_delta('héllo')}\r\n\r\n"
    f"id: 7\ndata: {_delta(' wörld 🙂')}\n\n"
    f"data: {_delta(SEPARATED)}\r\r"
    "event: note\ndata: first\ndata: second\n\n"
    ":ping\n\n"
    'data: {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}}\n\n'
    "data: [DONE]\n\n"
).encode()

EXPECTED = [
    SseEvent("message", _delta("héllo")),
    SseEvent("message", _delta(" wörld 🙂")),
    SseEvent("message", _delta(SEPARATED)),
    SseEvent("note", "first\nsecond"),
    SseEvent("message", '{"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}}'),
    SseEvent("message", "[DONE]"),
]


def _decode(pieces: list[bytes]) -> tuple[list[SseEvent], int]:
    decoder = SseDecoder()
    events = [event for piece in pieces for event in decoder.feed(piece)]
    return events, decoder.comments


def test_the_stream_in_one_read() -> None:
    assert _decode([STREAM]) == (EXPECTED, 2)


def test_every_split_point_gives_the_same_events() -> None:
    for cut in range(len(STREAM) + 1):
        assert _decode([STREAM[:cut], STREAM[cut:]]) == (EXPECTED, 2), cut


def test_one_byte_at_a_time_splits_every_line_and_character() -> None:
    assert _decode([STREAM[i : i + 1] for i in range(len(STREAM))]) == (EXPECTED, 2)


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        (b"\xff\xfe not utf-8\n\n", "not_sse"),
        (b"<html><body>502 Bad Gateway</body></html>\n\n", "not_sse"),
        (b'{"choices": []}\n', "not_sse"),
    ],
    ids=["not-utf8", "html", "bare-json"],
)
def test_bytes_that_are_not_sse_are_refused(raw: bytes, kind: str) -> None:
    with pytest.raises(StreamFault) as caught:
        SseDecoder().feed(raw)
    assert caught.value.kind == kind


def test_an_endless_line_is_refused() -> None:
    decoder = SseDecoder()
    for _ in range(31):  # just under the cap: still a line in progress
        assert decoder.feed(b"x" * 32_768) == []
    with pytest.raises(StreamFault) as caught:
        decoder.feed(b"x" * 32_768 * 2)
    assert caught.value.kind == "not_sse"


@pytest.mark.parametrize(
    ("event", "chunk"),
    [
        (SseEvent("message", "[DONE]"), Chunk(done=True)),
        (SseEvent("message", _delta("hi")), Chunk(text="hi")),
        (SseEvent("message", '{"choices": [{"index": 0, "text": "tx"}]}'), Chunk(text="tx")),
        (SseEvent("message", '{"choices": [{"delta": {"role": "assistant"}}]}'), Chunk()),
        (
            SseEvent("message", '{"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 9}}'),
            Chunk(usage=Usage(4, 9)),
        ),
        (SseEvent("message", '{"choices": [], "usage": {"completion_tokens": "9"}}'), Chunk()),
        (SseEvent("message", '{"choices": [{"delta": {"reasoning_content": "hm"}}]}'), Chunk(reasoning="hm")),
        (
            SseEvent("message", '{"choices": [{"delta": {"reasoning": "so", "content": "A"}}]}'),
            Chunk("A", "so"),
        ),
        (
            SseEvent(
                "message",
                '{"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 9,'
                ' "completion_tokens_details": {"reasoning_tokens": 4}}}',
            ),
            Chunk(usage=Usage(1, 9, 4)),
        ),
    ],
    ids=[
        "done",
        "chat-delta",
        "text-completion",
        "role-only",
        "usage",
        "bad-usage",
        "reasoning-only",
        "reasoning-and-answer",
        "usage-with-reasoning",
    ],
)
def test_chunks_are_read(event: SseEvent, chunk: Chunk) -> None:
    assert read_chunk(event) == chunk


@pytest.mark.parametrize(
    ("event", "kind"),
    [
        (SseEvent("message", '{"error": {"message": "overloaded", "code": 503}}'), "stream_error"),
        (SseEvent("message", '{"object": "error", "message": "bad"}'), "stream_error"),
        (SseEvent("error", '{"detail": "x"}'), "stream_error"),
        (SseEvent("message", "not json"), "not_sse"),
        (SseEvent("message", "[1, 2]"), "not_sse"),
        (SseEvent("message", '{"choices": ["x"]}'), "not_sse"),
        (SseEvent("message", "[" * 100_000), "not_sse"),
    ],
    ids=["error-object", "vllm-error", "error-event", "not-json", "not-object", "bad-choice", "deep-nesting"],
)
def test_faults_in_a_chunk_are_kinds(event: SseEvent, kind: str) -> None:
    with pytest.raises(StreamFault) as caught:
        read_chunk(event)
    assert caught.value.kind == kind


def test_what_the_decoder_keeps_between_reads_is_counted_for_the_budget() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: one\ndata: two\ndata: thr") == []
    kept = len("data: one") + len("data: two") + len("data: thr")  # two data lines, one line pending
    assert (decoder.kept_bytes, decoder.kept_pieces) == (kept, 2)
    assert decoder.feed(b"ee\n\n") == [SseEvent("message", "one\ntwo\nthree")]
    assert (decoder.kept_bytes, decoder.kept_pieces) == (0, 0)


def test_an_event_of_endless_data_lines_is_refused() -> None:
    decoder = SseDecoder()
    line = b"data: " + b"x" * 65_000 + b"\n"
    for _ in range(16):  # just under the cap: an event in progress
        assert decoder.feed(line) == []
    with pytest.raises(StreamFault) as caught:
        decoder.feed(line)  # 17 x 65 kB of data lines with no blank line: past the event's cap
    assert caught.value.kind == "not_sse"
    assert "event's data" in caught.value.detail
