"""What the measured window cost, from the spec's `cost:` and the raw logs.

Two bases, declared before the run (declared.json):
- managed: `{input_usd_per_million, output_usd_per_million}`, a per-token price list; the window
  cost what its successful measured requests' tokens cost at those prices (a failed request
  may be billed too; it is left out, as it served nothing).
- owned: `{gpu_hour_usd, gpus}`, a card owned or rented by the hour; the window cost the hourly
  rate times the measured windows' length, whatever was served in it.

Each figure divides that cost by the tokens of one class, times a million: input tokens, output
tokens, and input + output tokens. Each class takes the whole cost, so the three do not add up;
`usd_per_million_tokens` is the one to compare across bases at this workload's input:output
mix. `throughput` counts every successful measured request, `goodput` only those meeting the
declared SLO (null without one). Tokens are the server's counts where it sent usage, else ours
(`prompt_tokens`, `completion_tokens`). numpy only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from passport.audit._metrics import numeric_column
from passport.audit._types import CostFigures, CostRates, WindowFigures

__all__ = ["cost_figures"]


def _rates(usd: float, input_tokens: float, output_tokens: float) -> CostRates:
    def per_million(tokens: float) -> float | None:
        return usd / tokens * 1e6 if tokens > 0 else None

    return {"usd_per_million_input_tokens": per_million(input_tokens),
            "usd_per_million_output_tokens": per_million(output_tokens),
            "usd_per_million_tokens": per_million(input_tokens + output_tokens)}


def cost_figures(cost: dict[str, Any] | None, requests: Any, ok_measured: np.ndarray, meets: np.ndarray | None,
                 windows: list[WindowFigures]) -> CostFigures | None:
    """results.cost (see the module docstring); None when the spec declares no cost."""
    if not cost:
        return None
    prompt = numeric_column(requests, "prompt_tokens")
    completion = numeric_column(requests, "completion_tokens")
    window_s = float(sum(w["duration_s"] or 0.0 for w in windows))

    def tokens(mask: np.ndarray) -> tuple[float, float]:
        return float(np.nansum(prompt[mask])), float(np.nansum(completion[mask]))

    served_in, served_out = tokens(ok_measured)
    managed = cost.get("gpu_hour_usd") is None
    usd_per_hour = None
    if managed:
        price_in, price_out = float(cost["input_usd_per_million"]), float(cost["output_usd_per_million"])
        usd = (price_in * served_in + price_out * served_out) / 1e6
    else:
        usd_per_hour = float(cost["gpu_hour_usd"]) * int(cost.get("gpus") or 1)
        usd = usd_per_hour * window_s / 3600.0
    good = None
    if meets is not None:
        good_in, good_out = tokens(meets & ok_measured)
        good = _rates(usd, good_in, good_out)
    return {
        "basis": "managed" if managed else "owned",
        "input_usd_per_million": cost.get("input_usd_per_million"),
        "output_usd_per_million": cost.get("output_usd_per_million"),
        "gpu_hour_usd": cost.get("gpu_hour_usd"),
        "gpus": None if managed else int(cost.get("gpus") or 1),
        "usd_per_hour": usd_per_hour,
        "window_s": window_s,
        "input_tokens": int(served_in),
        "output_tokens": int(served_out),
        "usd_for_window": usd,
        "throughput": _rates(usd, served_in, served_out),
        "goodput": good,
    }
