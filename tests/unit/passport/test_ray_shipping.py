"""What `load.backend: ray` ships to actors on other hosts carries no credential: the prepared
requests lose their credential header lines before they enter the object store, a session's later
turns are framed by the sending client (they hold none of their own), and each actor puts its own
host's key back, giving the very bytes its own client would have built."""

from __future__ import annotations

import string
from typing import Any

import httptools
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness import Endpoint, HttpClient, with_headers, without_headers
from harness._loadspec import Timeouts
from passport.model import parse_spec
from passport.run._endpoint import auth_headers
from passport.run._phase import Part
from passport.run._plan import plan_workload, request_params
from passport.run._pool import build_pool
from passport.run._ray import _shipped, _with_credentials
from workloads import load_tokenizer

_TOKEN = st.text(string.ascii_letters + string.digits + "-_.", min_size=1, max_size=40)
_HEADERS = st.dictionaries(_TOKEN.map(lambda s: "X-" + s), _TOKEN, max_size=4)


def _client(headers: dict[str, str]) -> HttpClient:
    return HttpClient(Endpoint("http", "engine", 8000, "/v1"), Timeouts(), max_idle=1, extra_headers=headers)


def _parsed(request: bytes) -> tuple[dict[bytes, bytes], bytes]:
    """The request's headers and body, as an HTTP parser reads them."""
    headers: dict[bytes, bytes] = {}
    body = bytearray()

    class Sink:
        def on_header(self, name: bytes, value: bytes) -> None:
            headers[name.lower()] = value

        def on_body(self, data: bytes) -> None:
            body.extend(data)

    httptools.HttpRequestParser(Sink()).feed_data(request)
    return headers, bytes(body)


@given(secret=_HEADERS, own=_HEADERS, body=st.binary(max_size=200))
def test_taking_headers_out_and_putting_others_in_gives_what_a_client_with_those_would_send(
    secret: dict[str, str], own: dict[str, str], body: bytes
) -> None:
    bare = _client({}).request_bytes("/chat/completions", body)
    shipped = without_headers(_client(secret).request_bytes("/chat/completions", body), secret)
    assert shipped == bare
    for k, v in secret.items():
        assert f"{k}: {v}\r\n".encode() not in shipped[:shipped.index(b"\r\n\r\n") + 2]
    headers, read_body = _parsed(with_headers(shipped, own))
    expected, _ = _parsed(_client(own).request_bytes("/chat/completions", body))
    assert headers == expected and read_body == body


def test_a_header_that_is_not_there_is_an_error_not_a_silent_pass() -> None:
    request = _client({"Authorization": "Bearer k1"}).request_bytes("/x", b"{}")
    with pytest.raises(ValueError, match="Authorization"):
        without_headers(request, {"Authorization": "Bearer k2"})
    # only a whole header line counts: the same text in the body is not a header
    body_only = _client({}).request_bytes("/x", b"Authorization: Bearer k1\r\n")
    with pytest.raises(ValueError):
        without_headers(body_only, {"Authorization": "Bearer k1"})


def _part(key_env: str) -> tuple[Part, HttpClient]:
    spec = parse_spec({"endpoint": {"base_url": "http://engine:8000/v1", "api_key_env": key_env},
                       "load": {"pattern": "poisson", "rate_per_s": 5, "measure": {"requests": 6}},
                       "workload": {"tokenizer": "none", "sessions": {"turns": 2}}})
    client = _client(auth_headers(spec))
    schedule, request_set = plan_workload(spec, load_tokenizer("none"))
    params, is_target = request_params(spec, None)
    pool, _ = build_pool(spec, request_set, client, "m", None, params, is_target, "")
    return Part(spec, schedule, pool, list(range(len(pool))), 0, None), client


def test_what_travels_to_ray_actors_holds_no_key_and_each_host_sends_with_its_own(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    cloudpickle: Any = pytest.importorskip("ray.cloudpickle")
    here, there = "sk-coordinator-" + "7" * 24, "sk-worker-host-" + "9" * 24
    monkeypatch.setenv("PASSPORT_SHIP_KEY", here)
    part, client = _part("PASSPORT_SHIP_KEY")
    assert all(here.encode() in p.request for p in part.pool if p.request)  # the local run's bytes carry it
    assert any(p.turn is not None and not p.request for p in part.pool)  # later turns, built at send time
    shipped = _shipped(part, "http://engine:8000/v1")
    wire = cloudpickle.dumps(shipped)  # what Ray's object store holds
    assert here.encode() not in wire and b"Authorization" not in wire
    # On a worker host, with that host's key
    monkeypatch.setenv("PASSPORT_SHIP_KEY", there)
    theirs = auth_headers(part.spec)
    arrived = _with_credentials(cloudpickle.loads(wire).part, theirs)
    own_client = _client(theirs)
    for mine, sent in zip(part.pool, arrived.pool, strict=True):
        if mine.request:
            assert _parsed(sent.request) == _parsed(own_client.request_bytes(
                "/chat/completions", mine.request[mine.request.index(b"\r\n\r\n") + 4:]))
        assert sent.prompt_sha256 == mine.prompt_sha256
    later = next(p for p in arrived.pool if p.turn is not None and not p.request)
    assert later.turn is not None
    history = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    headers, _ = _parsed(later.turn.build(history, own_client))
    assert headers[b"authorization"] == f"Bearer {there}".encode()
    assert client is not own_client
