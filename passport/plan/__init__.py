"""The arithmetic before a measurement: what fits in an engine's memory (weights, KV per token,
fixed state per sequence, the KV pool, sequences that fit; `_capacity`), a month of tokens
priced on a managed endpoint and on cards by the hour (`_cost`), and `passport capacity` as one
call (`plan_capacity`, `_query`). Pure Python, nothing measured: transformers is loaded only to
read a model's config.json.

    from passport.plan import CapacityQuery, plan_capacity
    plan = plan_capacity(CapacityQuery(context=32768, kv_pool_gib=23.3, kv_kib_per_token=64))
    plan.report.sequences_naive        # 11
"""

from passport.plan._capacity import (
    DTYPE_BYTES,
    Architecture,
    Budget,
    CapacityReport,
    GiB,
    KiB,
    MiB,
    architecture_from_config,
    compute,
    implied_state_per_sequence,
    load_config,
)
from passport.plan._cost import HOURS_PER_MONTH, MonthlyCost, monthly_cost, replicas_needed
from passport.plan._query import CapacityPlan, CapacityQuery, plan_capacity

__all__ = [
    "DTYPE_BYTES", "Architecture", "Budget", "CapacityReport", "GiB", "KiB", "MiB", "architecture_from_config",
    "compute", "implied_state_per_sequence", "load_config", "HOURS_PER_MONTH", "MonthlyCost", "monthly_cost",
    "replicas_needed", "CapacityPlan", "CapacityQuery", "plan_capacity",
]
