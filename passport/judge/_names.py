"""The names a gate condition may use, resolved against the passport's schema before any
passport is read, so a typo is a usage error with the closest valid names, never a silent pass.

Short names: `<metric id>.<stat>`, `failure_inclusive.<metric id>.<stat>`, `error_rate`,
`verdict`, `canaries`, `slo`, `outcomes.<class>` and `counts.<name>` (classes and counts from
the auditor's vocabulary), and for an accuracy set `accuracy.<set>` (its accuracy under load),
`accuracy_alone.<set>`, `accuracy_under_load.<set>` and `accuracy_drop.<set>` (alone minus under
load, over the items answered both ways). Full paths into passport.json work too: `results.metrics.ttft.any.p99`,
`validity.counts.schema_failures`, `results.slo.attainment`, `results.client.cpu_share_max`, any
scalar field of `results` or `validity` (a key of a free-form map, e.g. a gauge's name, is taken
as written).
"""

from __future__ import annotations

import difflib
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from passport._errors import PassportError
from passport.audit import COUNT_NAMES, METRICS, OUTCOME_CLASSES, PERCENTILES
from passport.model import Passport

__all__ = ["GateError", "Target", "Kind", "resolve", "STATS"]

STATS = ("n", "mean", "std", "min", "max", *PERCENTILES)
Kind = Literal["latency", "number", "fraction", "verdict", "canaries", "slo", "text", "bool"]


class GateError(PassportError):
    """A gate condition cannot be understood (unknown name, bad operator or value)."""


@dataclass(frozen=True)
class Target:
    """What a name reads: a path into passport.json, the kind of its value, and the value when
    the path is absent (`outcomes.<class>` never seen: 0)."""

    name: str
    kind: Kind
    path: tuple[str, ...]
    absent: Any = None


_SPECIAL: dict[str, Target] = {
    "verdict": Target("verdict", "verdict", ("verdict",)),
    "validity.verdict": Target("validity.verdict", "verdict", ("validity", "verdict")),
    "canaries": Target("canaries", "canaries", ("validity", "canaries", "status")),
    "validity.canaries.status": Target("validity.canaries.status", "canaries", ("validity", "canaries", "status")),
    "slo": Target("slo", "slo", ("results", "slo", "met")),
    "error_rate": Target("error_rate", "fraction", ("validity", "counts")),
}


def _metric(name: str, prefix: tuple[str, ...], rest: str) -> Target | None:
    metric_id, _, stat = rest.rpartition(".")
    if metric_id not in METRICS or stat not in STATS:
        return None
    kind: Kind = "latency" if stat != "n" and METRICS[metric_id].unit == "s" else "number"
    return Target(name, kind, (*prefix, metric_id, stat))


# accuracy.<set> (under load), accuracy_alone.<set>, accuracy_under_load.<set>, accuracy_drop.<set>
_ACCURACY_NAMES = {"accuracy.": ("under_load", "accuracy"), "accuracy_alone.": ("alone", "accuracy"),
                   "accuracy_under_load.": ("under_load", "accuracy"), "accuracy_drop.": ("paired", "drop")}


def _vocabulary(name: str) -> Target | None:
    """The short forms and their full paths."""
    for head, prefix in (("results.metrics_failure_inclusive.", ("results", "metrics_failure_inclusive")),
                         ("failure_inclusive.", ("results", "metrics_failure_inclusive")),
                         ("results.metrics.", ("results", "metrics"))):
        if name.startswith(head):
            return _metric(name, prefix, name[len(head):])
    if found := _metric(name, ("results", "metrics"), name):
        return found
    for head, tail in _ACCURACY_NAMES.items():
        accuracy_set = name[len(head):]
        if name.startswith(head) and accuracy_set and "." not in accuracy_set:
            return Target(name, "fraction", ("results", "accuracy", accuracy_set, *tail))
    for heads, names, path, absent in ((("outcomes.", "results.outcomes."), OUTCOME_CLASSES, ("results", "outcomes"),
                                        0),
                                       (("counts.", "validity.counts."), COUNT_NAMES, ("validity", "counts"), None)):
        for head in heads:
            if name.startswith(head) and name[len(head):] in names:
                return Target(name, "number", (*path, name[len(head):]), absent)
    return None


def _unwrap(tp: Any) -> Any:
    """The type inside Optional[...] / X | None."""
    if get_origin(tp) in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        return args[0] if len(args) == 1 else tp
    return tp


def _fields(tp: Any) -> dict[str, Any] | None:
    """Field name -> type of a pydantic model or a TypedDict; None for anything else."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return {k: f.annotation for k, f in tp.model_fields.items()}
    if isinstance(tp, type) and hasattr(tp, "__required_keys__"):
        return dict(typing.get_type_hints(tp))
    return None


def _scalar_kind(tp: Any, last: str) -> Kind | None:
    if tp is bool:
        return "bool"
    if tp in (int, float):
        return "latency" if last.endswith("_s") else "number"
    if tp is str or get_origin(tp) is Literal:
        return "text"
    return None


# Maps whose keys come from a vocabulary (`_vocabulary`), never taken as written.
_VOCABULARY_MAPS = (("validity", "counts"), ("results", "outcomes"), ("results", "metrics"),
                    ("results", "metrics_failure_inclusive"))


def _walk(name: str) -> Target | None:
    """A full path to a scalar field of `results` or `validity`, by the model's types."""
    parts = name.split(".")
    if parts[0] not in ("results", "validity") or tuple(parts[:2]) in _VOCABULARY_MAPS:
        return None
    tp: Any = Passport
    for part in parts:
        tp = _unwrap(tp)
        fields = _fields(tp)
        if fields is not None:
            if part not in fields:
                return None
            tp = fields[part]
        elif get_origin(tp) is dict:
            tp = get_args(tp)[1]
        else:
            return None
    kind = _scalar_kind(_unwrap(tp), parts[-1])
    return None if kind is None else Target(name, kind, tuple(parts))


def _paths(tp: Any, prefix: str, depth: int) -> list[str]:
    """Full paths of the model's fixed (non-map) fields, for suggestions."""
    fields = _fields(_unwrap(tp))
    if fields is None or depth == 0:
        return [prefix]
    return [p for k, sub in fields.items() for p in _paths(sub, f"{prefix}.{k}", depth - 1)]


def _suggestions(name: str) -> list[str]:
    candidates = [*_SPECIAL, *(f"{m}.{s}" for m in METRICS for s in STATS),
                  *(f"outcomes.{c}" for c in OUTCOME_CLASSES), *(f"counts.{c}" for c in COUNT_NAMES),
                  *(f"validity.counts.{c}" for c in COUNT_NAMES),
                  *_paths(Passport.model_fields["results"].annotation, "results", 3),
                  *_paths(Passport.model_fields["validity"].annotation, "validity", 3)]
    return difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)


def resolve(name: str) -> Target:
    """The target of a gate name; GateError with the closest valid names when it has none."""
    found = _SPECIAL.get(name) or _vocabulary(name) or _walk(name)
    if found is not None:
        return found
    close = _suggestions(name)
    hint = f"did you mean {', '.join(repr(c) for c in close)}? " if close else ""
    raise GateError(
        f"unknown gate name {name!r}: {hint}use <metric id>.<stat> (stats: {', '.join(STATS)}), "
        "failure_inclusive.<metric id>.<stat>, error_rate, verdict, canaries, slo, outcomes.<class> "
        "accuracy.<set>, accuracy_alone.<set>, accuracy_drop.<set>, "
        f"({', '.join(OUTCOME_CLASSES)}), counts.<name>, or a path into passport.json such as "
        "validity.counts.schema_failures")
