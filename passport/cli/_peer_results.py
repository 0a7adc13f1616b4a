"""The peers' own result files of runs: `passport run --save-result` writes vLLM's result JSON of
the run just written, named and placed as `vllm bench serve` names and places it (--result-dir,
--result-filename, --label); `--output-path` writes guidellm's benchmarks.json; `show --as TOOL
--json` writes any of them. For the scripts and dashboards that read those tools' files
(`passport.audit._vllm_result`, `passport.audit._peer_files`)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path
from typing import Any

__all__ = ["save_result", "vllm_result_of", "peer_file", "write_guidellm_report"]


# vLLM bench serve's --backend for each endpoint kind it has a client for (a result names it)
_BACKEND_OF = {"chat": "openai-chat", "completions": "openai", "responses": "openai-responses",
               "audio_transcriptions": "openai-audio", "embeddings": "openai-embeddings", "rerank": "vllm-rerank",
               "score": "vllm-rerank"}

def vllm_result_of(args: argparse.Namespace, run: Any) -> tuple[dict[str, Any], str]:
    """vLLM's result JSON of the opened run, under the options of `args` (vLLM's flags: backend,
    label, percentiles, --save-detailed), and the file name vLLM would give it."""
    from passport.audit import tool_view
    from passport.audit._vllm_result import percentile_word, vllm_result, vllm_result_name
    from passport.cli._vocabulary import percentile_metrics, percentiles

    protocol: dict[str, Any] = run.data["protocol"]
    effective = protocol["effective"]
    api = str(effective["endpoint"]["api"])
    # vLLM's default percentile metrics: ttft,tpot,itl for generation, e2el for a pooling run
    chosen = percentiles(args.metric_percentiles)
    metrics = percentile_metrics(args.percentile_metrics or ("e2el" if api in ("embeddings", "rerank", "score")
                                                             else None))
    view = tool_view(run.files, "vllm", api, ("mean", "median", "std", *(f"p{percentile_word(p)}" for p in chosen)))
    load = effective["load"]
    backend = args.backend or _BACKEND_OF.get(api, "openai")
    closed = load["pattern"] == "closed"
    request_rate: float | str = "inf" if closed else float(load["rate_per_s"])
    uncapped = closed and args.spec is None and args.concurrency is None  # vLLM's default: every prompt at once
    max_concurrency = None if uncapped else load.get("concurrency")
    model = str((run.data["identity"].get("model.id") or {}).get("value") or "")
    date = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    settings = {"date": date, "endpoint_type": backend, "backend": backend, "label": args.label, "model_id": model,
                "tokenizer_id": (protocol.get("workload") or {}).get("tokenizer") or model,
                "num_prompts": view.requests + view.failed,
                "request_rate": request_rate, "burstiness": float(load.get("burstiness") or 1.0),
                "max_concurrency": max_concurrency}
    texts = _texts(run, view.per_request.get("request_ids", [])) if args.save_detailed else None
    result = vllm_result(view, settings, metrics, chosen, args.save_detailed, texts)
    result["passport"] = {"run": str(run.folder), "content_sha256": run.data.get("content_sha256")}
    return result, vllm_result_name(args.label or backend, request_rate, max_concurrency, model, date)


def save_result(args: argparse.Namespace, folder: Path, level: str | None = None) -> Path:
    """Write the result JSON of the run in `folder` (read through the door); returns its path.
    `level`: a sweep level's run name, added to --result-filename so each level keeps its file
    (vLLM's own default name already differs by rate and concurrency)."""
    from passport.audit import Trust, open_run

    run = open_run(folder, Trust())  # the run this process has just written and signed
    result, default_name = vllm_result_of(args, run)
    name = args.result_filename or default_name
    if args.result_filename and level is not None:
        stem, dot, suffix = name.rpartition(".")
        name = f"{stem}-{level}.{suffix}" if dot else f"{name}-{level}"
    path = Path(args.result_dir or ".") / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result))
    return path


def _texts(run: Any, ids: list[int]) -> list[str]:
    """The answers' text of the requests `ids`, in that order ("" where only hashes were kept)."""
    table = run.files.table("requests")
    if table is None or "response_text" not in table.column_names:
        return [""] * len(ids)
    text = dict(zip(table.column("request_id").to_pylist(), table.column("response_text").to_pylist(), strict=True))
    return [str(text.get(i) or "") for i in ids]


def peer_file(tool: str, runs: list[Any]) -> dict[str, Any]:
    """guidellm's or AIPerf's result file of opened runs (guidellm: one benchmark per run; AIPerf:
    the first run)."""
    from passport.audit import aiperf_export, guidellm_report, tool_view
    from passport.cli._version import version

    def view(run: Any) -> Any:
        api = str(run.data["protocol"]["effective"]["endpoint"]["api"])
        return tool_view(run.files, tool, api)  # type: ignore[arg-type]

    if tool == "guidellm":
        return guidellm_report([(run.data, view(run)) for run in runs], version())
    return aiperf_export(runs[0].data, view(runs[0]), version())


def write_guidellm_report(path: Path, folders: list[Path]) -> Path:
    """guidellm's benchmarks.json of run folders this process has just written (`--output-path`:
    a folder gets benchmarks.json inside, as guidellm resolves it); returns where it went."""
    from passport.audit import Trust, open_run

    target = path / "benchmarks.json" if path.is_dir() else path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(peer_file("guidellm", [open_run(f, Trust()) for f in folders])) + "\n")
    return target
