"""Control-plane calls (few, untimed) over httpx: health, model list, engine probes.

Kept off the timing loop: these run before the timed phase, or in the launcher's thread.
"""

from __future__ import annotations

import json
import ssl
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from harness._errors import EndpointError
from harness._loadspec import CONTROL_BYTES

__all__ = ["ControlClient", "Answer"]



class ControlClient:
    """httpx client for the endpoint's control plane; `headers` may carry the API key.

    Every response is read whole only up to `max_bytes` and within `timeout_s` of wall-clock
    time (a body that never ends counts as no answer). With `record` (a list), each exchange is
    appended as {method, path, request, status, body, error, error_type}: what identity was read from, kept
    in the run folder (probes.jsonl) so that `passport verify` can replay it. Headers (the API key)
    are never recorded.
    """

    def __init__(self, base_url: str, headers: dict[str, str] | None = None, timeout_s: float = 10.0,
                 ca_file: str | None = None, transport: httpx.BaseTransport | None = None,
                 record: list[dict[str, Any]] | None = None, max_bytes: int = CONTROL_BYTES) -> None:
        self.base_url = base_url.rstrip("/")
        root = self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url
        self.root_url = root
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self.record = record
        verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca_file) if ca_file else True
        # only the encodings `_decoder` bounds (httpx would offer br and zstd when installed)
        self._client = httpx.Client(headers={"Accept-Encoding": "gzip, deflate", **(headers or {})},
                                    timeout=timeout_s, verify=verify, transport=transport)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fetch(self, method: str, url: str, body: Any = None, timeout_s: float | None = None) -> Answer:
        """`method url` answered within the bounds; raises httpx.HTTPError when it is not.

        A reset on the way is tried once more, on a fresh connection: a server may close a kept-alive
        connection after an error answer (vLLM 0.32 does after a 500), and the next call on it fails
        before the server sees it. Control-plane calls are idempotent (reads, resets, tokenizing)."""
        try:
            return self._exchange(method, url, body, timeout_s)
        except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError):
            return self._exchange(method, url, body, timeout_s)

    def _exchange(self, method: str, url: str, body: Any, timeout_s: float | None) -> Answer:
        """One bounded exchange; raises httpx.HTTPError when there is no whole answer in time."""
        limit_s = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + limit_s
        path = url[len(self.root_url):] if url.startswith(self.root_url) else url
        entry: dict[str, Any] = {"method": method, "path": path, "request": body, "status": None, "body": None,
                                 "error": None}
        try:
            with self._client.stream(method, url, json=body, timeout=limit_s) as response:
                # decoded here, never past the bound (a gzip bomb); an answer already in memory (a test
                # transport's) is taken as httpx decoded it
                loaded = response.is_stream_consumed
                decode = (lambda raw, room: raw) if loaded else _decoder(url, response.headers.get("content-encoding"))
                data = bytearray()
                for raw in [response.content] if loaded else response.iter_raw():
                    data += decode(raw, self.max_bytes + 1 - len(data))
                    if len(data) > self.max_bytes:
                        raise _Unbounded(f"{url} answered more than {self.max_bytes} bytes (limits.control_bytes)")
                    if time.monotonic() > deadline:
                        raise _Unbounded(f"{url} did not finish its answer within {limit_s} s (timeouts.control_s)")
                answer = Answer(response.status_code, bytes(data).decode("utf-8", "replace"))
        except httpx.HTTPError as exc:
            entry.update(error=str(exc), error_type=type(exc).__name__)
            self._keep(entry)
            raise
        entry.update(status=answer.status_code, body=answer.text)
        self._keep(entry)
        return answer

    def _keep(self, entry: dict[str, Any]) -> None:
        if self.record is not None:
            self.record.append(entry)

    def models(self) -> list[dict[str, Any]]:
        """GET {base}/models; raises EndpointError when unreachable or not OpenAI-shaped."""
        url = f"{self.base_url}/models"
        try:
            response = self.fetch("GET", url)
        except _Unbounded as exc:
            raise EndpointError(f"{exc}; a model list is a few hundred bytes, sent at once: "
                                "is endpoint.base_url an OpenAI-compatible server?") from exc
        except httpx.HTTPError as exc:
            raise EndpointError(
                f"cannot reach {url}: {exc}. Is the server running, and is endpoint.base_url "
                "(or --endpoint) right, including the /v1 suffix?"
            ) from exc
        if response.status_code in (401, 403):
            raise EndpointError(
                f"{url} answered {response.status_code}: the endpoint wants an API key; "
                "set endpoint.api_key_env (or --api-key-env) to the name of the variable holding it"
            )
        if response.status_code != 200:
            raise EndpointError(f"{url} answered HTTP {response.status_code}: {response.text[:200]}")
        if not response.text.strip():
            raise EndpointError(
                f"{url} answered 200 with an empty body: the server failed after sending its status. "
                "mlx_lm.server does this when no Hugging Face cache folder exists (it scans it for models): "
                "create ~/.cache/huggingface/hub (or the hub folder under $HF_HOME) and start it again")
        try:
            data = response.json()["data"]
        except (ValueError, KeyError, TypeError) as exc:
            raise EndpointError(f"{url} did not return an OpenAI model list: {response.text[:200]}") from exc
        if not isinstance(data, list):
            raise EndpointError(f"{url} returned `data` that is not a list")
        return data

    def healthy(self) -> bool:
        """True when {root}/health answers 200 (False on any error)."""
        try:
            return self.fetch("GET", f"{self.root_url}/health", timeout_s=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    def request(self, method: str, path: str, body: Any = None) -> Answer | None:
        """{method} {root}{path}; None when unreachable, too slow or too large (a probe, never fatal)."""
        try:
            return self.fetch(method, f"{self.root_url}{path}", body)
        except httpx.HTTPError:
            return None

    def get_any(self, path: str, method: str = "GET", body: Any = None) -> Any:
        """{root}{path} as parsed JSON (any type), or None when absent, failing or not JSON."""
        response = self.request(method, path, body)
        if response is None or response.status_code != 200:
            return None
        try:
            return response.json()
        except ValueError:
            return None

    def get_json(self, path: str, method: str = "GET", body: Any = None) -> dict[str, Any] | None:
        """{root}{path} as a JSON object, or None when absent or failing (a probe, never fatal)."""
        value = self.get_any(path, method, body)
        return value if isinstance(value, dict) else None

    def get_text(self, path: str) -> str | None:
        """GET {root}{path} as text (e.g. Prometheus /metrics), or None when absent or failing."""
        response = self.request("GET", path)
        return response.text if response is not None and response.status_code == 200 else None


def _decoder(url: str, encoding: str | None) -> Callable[[bytes, int], bytes]:
    """(raw bytes, room left) -> at most `room` decoded bytes, for the answer's Content-Encoding:
    identity, gzip or deflate; any other encoding is refused (it was not asked for)."""
    name = (encoding or "identity").strip().lower()
    if name == "identity":
        return lambda raw, room: raw
    if name not in ("gzip", "deflate", "x-gzip"):
        raise _Unbounded(f"{url} answered in Content-Encoding {name!r}, which passport does not decode")
    inflate = zlib.decompressobj(wbits=47 if name != "deflate" else 15)  # 47: gzip or zlib header

    def decode(raw: bytes, room: int) -> bytes:
        try:
            out = inflate.decompress(raw, max(room, 1))
        except zlib.error as exc:
            raise _Unbounded(f"{url} sent a body that does not decode as {name}: {exc}") from None
        if inflate.unconsumed_tail:  # more would come out of this chunk than there is room for
            raise _Unbounded(f"{url} answered more than the control-plane bound once decoded from {name} "
                             "(limits.control_bytes)")
        return out

    return decode


class _Unbounded(httpx.HTTPError):
    """An answer that was still coming at the control plane's size or time bound."""


@dataclass(frozen=True)
class Answer:
    """A whole, bounded answer: status and body text."""

    status_code: int
    text: str

    def json(self) -> Any:
        return json.loads(self.text)
