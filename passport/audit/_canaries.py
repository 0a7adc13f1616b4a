"""The passport's canary section and canary counts, from canaries.parquet (one row per case).

The run writes every case there and builds `validity.canaries` with this function; `verify`
recomputes it from the same file. Rows of phase `gate` are the pre-timing suite; rows of phase
`under_load` were sampled during the timed run (`canary_share`) and are kept apart.
"""

from __future__ import annotations

import pyarrow as pa

from passport.audit._types import CanaryFailureFigures, CanaryFigures, CanaryUnderLoadFigures

__all__ = ["canary_figures", "canary_counts", "CANARY_COUNT_NAMES", "CANARIES_FILE"]

CANARIES_FILE = "canaries.parquet"
# A failed case's category -> the count it adds to (validity.counts).
_CATEGORY_COUNT = {"rejection": "canary_rejections", "truncation": "canary_truncations",
                   "schema_failure": "canary_schema_failures", "tool_failure": "canary_tool_failures",
                   "wrong_answer": "wrong_answers", "error": "canary_errors"}
CANARY_COUNT_NAMES = tuple(_CATEGORY_COUNT.values())


def _failures(rows: list[dict[str, object]]) -> list[CanaryFailureFigures]:
    return [{"case_id": str(r["case_id"]), "kind": str(r["kind"]), "category": str(r["category"] or "error"),
             "reason": str(r["reason"]), "expected": str(r["expected"]), "actual": str(r["actual"])}
            for r in rows if r["verdict"] != "pass"]


def canary_figures(table: pa.Table, suite: str, suite_version: int | None, forced: bool,
                   share_under_load: float | None) -> CanaryFigures:
    """`validity.canaries` from the cases of `table`. `share_under_load` is the declared
    `canary_share` when a timed phase ran (None: no cases were sampled under load)."""
    rows = table.to_pylist()
    gate = [r for r in rows if r["phase"] == "gate"]
    failed = _failures(gate)
    served = [int(r["prompt_tokens"]) for r in gate if r["kind"] == "long_context" and r["outcome"] == "ok"
              and r["prompt_tokens"]]
    loaded: CanaryUnderLoadFigures | None = None
    if share_under_load:
        under = [r for r in rows if r["phase"] == "under_load"]
        loaded = {"share": share_under_load, "n_cases": len(under),
                  "n_failed": sum(r["verdict"] != "pass" for r in under), "failures": _failures(under)}
    return {
        "status": "failed" if failed else "passed", "suite": suite,
        "reason": f"{len(failed)} of {len(gate)} cases failed" if failed else f"all {len(gate)} cases passed",
        "suite_sha256": str(gate[0]["suite_sha256"]) if gate else None, "suite_version": suite_version,
        "n_cases": len(gate), "n_failed": len(failed), "forced": forced and bool(failed), "failures": failed,
        "largest_context_served_tokens": max(served) if served else None, "under_load": loaded,
    }


def canary_counts(table: pa.Table) -> dict[str, int]:
    """Failed pre-timing cases by category, under the names `validity.counts` uses."""
    counts = dict.fromkeys(CANARY_COUNT_NAMES, 0)
    for r in table.to_pylist():
        if r["phase"] == "gate" and r["verdict"] != "pass":
            counts[_CATEGORY_COUNT.get(str(r["category"] or "error"), "canary_errors")] += 1
    return counts
