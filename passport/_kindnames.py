"""The endpoint kinds' names and paths, with nothing imported: the CLI builds `--api` and
`--endpoint /v1/...` from these without loading the HTTP stack (harness._kinds has the rest)."""

from __future__ import annotations

__all__ = ["KIND_PATHS"]

# endpoint.api -> the path after the base URL's /v1, in the order `--help` lists them
KIND_PATHS: dict[str, str] = {
    "chat": "/chat/completions",
    "completions": "/completions",
    "responses": "/responses",
    "anthropic_messages": "/messages",
    "audio_transcriptions": "/audio/transcriptions",
    "embeddings": "/embeddings",
    "rerank": "/rerank",
    "score": "/score",
}
