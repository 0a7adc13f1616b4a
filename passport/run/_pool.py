"""The request pool: every request of the set prepared as HTTP bytes before timing, with what
its answer will be checked against, and a session's later turns built from the answers."""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson

from harness import KINDS, PreparedRequest, ResponseExpectation, SessionTurn, Transport, request_body
from harness.engines import structured_fields
from passport._errors import SpecError
from passport.model import RunSpec
from workloads import RequestSet, data_url, speechlike_clip, wav_duration_ms

__all__ = ["build_pool", "audio_clip"]

_AUDIO_FILE_BYTES = 256 << 20  # a user's clip larger than this is refused (a transcription API takes 25 MiB)


def audio_clip(audio: dict[str, Any]) -> tuple[bytes, int]:
    """(WAV bytes, duration in ms) of a request set's `audio` field: a generated clip, or a file
    (refused with the fix when it cannot be read or is not a PCM WAV)."""
    if "file" not in audio:
        ms = int(audio["duration_ms"])
        return speechlike_clip(ms, int(audio["seed"])), ms
    path = str(audio["file"])
    try:
        with open(path, "rb") as file:
            clip = file.read(_AUDIO_FILE_BYTES + 1)
    except OSError as exc:
        raise SpecError(f"workload.audio.files: cannot read {path}: {exc.strerror}; give the path of a WAV file") \
            from None
    if len(clip) > _AUDIO_FILE_BYTES:
        raise SpecError(f"workload.audio.files: {path} is over {_AUDIO_FILE_BYTES >> 20} MiB; cut it shorter")
    try:
        return clip, wav_duration_ms(clip)
    except ValueError as exc:
        raise SpecError(f"workload.audio.files: {path} is not a PCM WAV file ({exc}); convert it, e.g. "
                        f"ffmpeg -i IN -ar 16000 -ac 1 OUT.wav") from None


def _user_content(prompt: str, images_json: str | None) -> str | list[dict[str, Any]]:
    """The user message's content: the text, or text and images (PNG data URLs) as parts."""
    if not images_json:
        return prompt
    parts: list[dict[str, Any]] = [{"type": "text", "text": prompt}]
    for width, height, seed in orjson.loads(images_json):
        parts.append({"type": "image_url", "image_url": {"url": data_url(int(width), int(height), int(seed))}})
    return parts


def _expectation(body: dict[str, Any]) -> ResponseExpectation | None:
    """What a request's body asks of the answer, for the after-the-fact check."""
    form = body.get("response_format")
    if isinstance(form, dict) and form.get("type") == "json_schema":
        return ResponseExpectation("json_schema", schema=(form.get("json_schema") or {}).get("schema") or {})
    if isinstance(form, dict) and form.get("type") == "json_object":  # any JSON object will do
        return ResponseExpectation("json_schema", schema={"type": "object"})
    if body.get("tools") and body.get("tool_choice") != "none":
        choice = body.get("tool_choice")
        named = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
        return ResponseExpectation("tool_call", tools=list(body["tools"]), tool=named)
    return None


def build_pool(spec: RunSpec, request_set: RequestSet, client: Transport, model_id: str, engine: str | None,
               params: dict[str, Any], max_tokens_is_target: bool,
               salt: str) -> tuple[list[PreparedRequest], str | None]:
    """Every request of the set, prepared: (pool, the structured-output form used or None).

    Structured-output and tool requests are sent without `ignore_eos` (the answer must be free to
    end) and their max_tokens is a cap; their answers are checked after the fact."""
    api = spec.endpoint.api
    path = KINDS[api].path
    wl = request_set.table.to_pydict()
    n = len(wl["prompt"])
    none: list[Any] = [None] * n
    bodies, groups = wl.get("body_json") or none, wl.get("prefix_group")
    images, sessions, turns = wl.get("images_json") or none, wl.get("session") or none, wl.get("turn") or none
    thinks, shapes = wl.get("think_time_s") or none, wl.get("shape") or none
    form_used: str | None = None
    session_turns = Counter(x for x in sessions if x is not None)
    free_params = {k: v for k, v in params.items() if k != "ignore_eos"}
    pool: list[PreparedRequest] = []
    for i in range(n):
        prompt = wl["prompt"][i]
        if salt and (groups is None or groups[i] is not None):
            prompt = f"{salt} {prompt}"
        body = orjson.loads(bodies[i]) if bodies[i] else {}
        expect = _expectation(body)
        if expect is not None and (body.get("response_format") or {}).get("type") == "json_schema":
            fields, form_used = structured_fields(expect.schema or {}, engine, api)
            body = {k: v for k, v in body.items() if k != "response_format"} | fields
        sent_params = free_params if expect is not None else params
        is_target = max_tokens_is_target and expect is None
        out = wl["output_tokens_target"][i]
        message = {"role": "user", "content": _user_content(prompt, images[i])}
        if images[i] or sessions[i] is not None:
            body["messages"] = [message]
        turn = None
        if sessions[i] is not None:
            last = i + 1 >= n or sessions[i + 1] != sessions[i]

            def build(history: list[dict[str, Any]], sender: Transport, body: dict[str, Any] = body,
                      message: dict[str, Any] = message, prompt: str = prompt, out: int = out,
                      sent: dict[str, Any] = sent_params) -> bytes:
                own = body | {"messages": history + [message]}
                if history and history[-1].get("response_id"):  # the Responses API holds the conversation
                    own["previous_response_id"] = history[-1]["response_id"]
                return sender.request_bytes(path, *request_body(api, model_id, prompt, out, sent, own))
            turn = SessionTurn(session=int(sessions[i]), turn=int(turns[i]), turns=session_turns[sessions[i]],
                               next_index=-1 if last else i + 1,
                               think_ns=int(round((thinks[i] or 0.0) * 1e9)), message=message, build=build)
        later_turn = turn is not None and turn.turn > 0  # its bytes are built from the answers, at send time
        audio_ms = None
        if "audio" in body:
            body["clip"], audio_ms = audio_clip(body.pop("audio"))
        n_inputs = (len(body["input"]) if "input" in body else 1 if api == "embeddings"
                    else len(body["documents"]) if "documents" in body else None)
        pool.append(PreparedRequest(
            request=b"" if later_turn else client.request_bytes(
                path, *request_body(api, model_id, prompt, out, sent_params, body or None)),
            prompt=prompt, max_tokens=out, max_tokens_is_target=is_target,
            input_tokens_target=wl["input_tokens_target"][i], input_tokens_client=wl["input_tokens_client"][i],
            output_tokens_target=out, shape=shapes[i], expect=expect, turn=turn, n_inputs=n_inputs,
            audio_ms=audio_ms))
    return pool, form_used
