"""Audio transcription (`/v1/audio/transcriptions`), streamed: the multipart body and the stream.

The body is `multipart/form-data`: the clip as `file` (WAV), `model`, `stream=true`,
`response_format=json`, and each decoding field and `decoding.extra` entry as a form field (a
number or string as is, anything else as JSON). The boundary is fixed per request from the
clip's hash, so the same clip gives the same bytes.

Two stream dialects: vLLM sends chat-shaped chunks (`choices[0].delta.content`, a finish
reason, `[DONE]`), parsed by the chat parser; OpenAI sends typed events
(`transcript.text.delta` with `delta`, then `transcript.text.done` with the whole `text` and
`usage`), recognised by their `type`. A server that ignores `stream` and answers one JSON
`{"text": ...}` is parsed as a whole answer: its text counts, with no first-token time.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from harness._openai import StreamSummary, summarize, usage_count
from harness._sse import SSEParser
from harness._typed_events import Carried, summarize_typed

__all__ = ["transcription_body", "summarize_transcription", "parse_transcription_body"]


def _field(name: str, value: Any) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    return f'Content-Disposition: form-data; name="{name}"\r\n\r\n{text}\r\n'


def transcription_body(model: str, clip: bytes, params: dict[str, Any]) -> tuple[bytes, str]:
    """(body, its Content-Type) of one streamed transcription request."""
    boundary = "passport-" + hashlib.sha256(clip).hexdigest()[:24]
    fields = {"model": model, "stream": "true", "response_format": "json", **params}
    head = "".join(f"--{boundary}\r\n{_field(k, v)}" for k, v in fields.items())
    file_part = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="clip.wav"\r\n'
                 "Content-Type: audio/wav\r\n\r\n")
    body = head.encode() + file_part.encode() + clip + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def _handle(s: StreamSummary, obj: dict[str, Any], carried: Carried) -> None:
    kind = obj.get("type")
    if kind == "transcript.text.delta" and isinstance(obj.get("delta"), str):
        carried.text = obj["delta"]
    elif kind == "transcript.text.done":
        carried.final = True
        s.finish_reason = "stop"
        usage = obj.get("usage")
        if isinstance(usage, dict):
            s.prompt_tokens = usage_count(s, "input_tokens", usage.get("input_tokens"))
            s.completion_tokens = usage_count(s, "output_tokens", usage.get("output_tokens"))
    elif kind == "error" or obj.get("error") is not None:
        error = obj.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        carried.error = f"error event: {message or obj.get('message')}"[:512]


def summarize_transcription(sse: SSEParser) -> StreamSummary:
    """A finished transcription stream, in whichever dialect it came (module docstring)."""
    payloads = sse.payloads
    if payloads and b'"transcript.text.' in payloads[0]:  # a quote inside a JSON string is escaped
        return summarize_typed(sse, _handle)
    return summarize(sse, "chat")


def parse_transcription_body(body: bytes) -> StreamSummary:
    """An unstreamed answer, `{"text": ...}` (and usage where given)."""
    s = StreamSummary()
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("text"), str):
        s.error = f"the answer is not a transcription: {body[:120]!r}"
        return s
    s.content = doc["text"]
    s.finish_reason = "stop"
    usage = doc.get("usage")
    if isinstance(usage, dict):
        s.prompt_tokens = usage_count(s, "input_tokens", usage.get("input_tokens"))
        s.completion_tokens = usage_count(s, "output_tokens", usage.get("output_tokens"))
    return s
