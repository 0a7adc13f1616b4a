"""The server's tokenizer against ours: the first prompts counted by both, disagreements recorded.

Length targets are met under the harness's tokenizer; where the server offers tokenization
(the tokenize route of its engine profile, special tokens off; an unknown engine is sent
llama.cpp's and vLLM's fields both) the first prompts are counted by the server too. A disagreement does not
stop the run: it is recorded in `protocol.workload.tokenizer_check`, because it means the
declared lengths are not the lengths the engine sees (a wrong tokenizer, or a template).
Engines without a route, managed APIs among them, are not asked.
"""

from __future__ import annotations

from typing import Any

import orjson

from harness import ControlClient, engines

__all__ = ["tokenizer_check", "texts_of", "N_CHECKED"]

N_CHECKED = 8


def _server_count(control: ControlClient, route: engines.TokenizeRoute, model: str, text: str) -> int | None:
    answer = control.get_json(route.path, method="POST", body=route.body(text, model))
    if answer is None:
        return None
    if isinstance(answer.get("count"), int):
        return int(answer["count"])
    tokens = answer.get("tokens")
    return len(tokens) if isinstance(tokens, list) else None


def texts_of(prompt: str, body_json: str | None) -> list[str]:
    """What the engine tokenizes of one request: the texts of a pooling request one by one (an
    embeddings batch's inputs; rerank's and score's query and documents), else the prompt. A
    pooling request's prompt joins its texts with blank lines, which the engine never sees."""
    body = orjson.loads(body_json) if body_json else {}
    if isinstance(body.get("input"), list):
        return [str(t) for t in body["input"]]
    if isinstance(body.get("documents"), list):
        return [str(body.get("query", "")), *(str(t) for t in body["documents"])]
    return [prompt]


def tokenizer_check(control: ControlClient, engine: str | None, model: str,
                    prompts: list[tuple[int, list[str], int | None]]) -> dict[str, Any]:
    """Count the first N_CHECKED (request_index, its texts, client count) on the server, each
    request's texts one by one and summed; the result for the protocol: endpoint, checked,
    agreed, and each disagreement with both counts."""
    found = engines.profile(engine)
    route = engines.ANY_TOKENIZE if found is None else found.tokenize
    if route is None:
        return {"endpoint": None, "checked": 0, "agreed": 0, "disagreements": [],
                "note": f"not checked: {engine} has no tokenize route"}
    checked = agreed = 0
    disagreements: list[dict[str, Any]] = []
    for index, texts, client in prompts[:N_CHECKED]:
        counts = [_server_count(control, route, model, text) for text in texts]
        server = None if any(c is None for c in counts) else sum(c for c in counts if c is not None)
        if server is None:
            if checked == 0:
                return {"endpoint": None, "checked": 0, "agreed": 0, "disagreements": [],
                        "note": "not checked: the server offers no POST /tokenize"}
            break
        checked += 1
        if client is not None and server == client:
            agreed += 1
        else:
            disagreements.append({"request_index": index, "client_tokens": client, "server_tokens": server})
    note = None
    if disagreements:
        note = (f"the server counts differently for {len(disagreements)} of {checked} prompts: declared input "
                "lengths are not what the engine sees (check workload.tokenizer)")
    return {"endpoint": f"{control.root_url}{route.path}", "checked": checked, "agreed": agreed,
            "disagreements": disagreements, "note": note}
