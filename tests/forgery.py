"""A forger who edits a run's raw tables and then recomputes everything verify recomputes:
results, counts, rules, the files table and the content hash. What verify still refuses after
this is what recomputation cannot hide."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from passport.audit import RunState, content_sha256, derive, file_entries

__all__ = ["rederive_and_reseal"]


def rederive_and_reseal(run: Path) -> dict[str, Any]:
    """Rewrite passport.json from the run folder's (edited) raw tables as `passport run` would;
    returns the new passport."""
    passport = json.loads((run / "passport.json").read_text())
    validity = passport["validity"]
    state = RunState(validity["complete"], validity["incomplete_reason"], validity["forced"],
                     validity["launched_engine"])
    found = derive(run, passport["protocol"], state)
    figures = ("results", "counts", "canaries", "rules", "verdict")
    derived = json.loads(json.dumps({k: getattr(found, k) for k in figures}))
    defined = passport["protocol"]["metric_definitions"]
    passport["results"] = {
        **derived["results"],
        "metrics": {k: v for k, v in derived["results"]["metrics"].items() if k in defined},
        "metrics_failure_inclusive": {k: v for k, v in derived["results"]["metrics_failure_inclusive"].items()
                                      if k in defined}}
    validity.update(counts=derived["counts"], rules=derived["rules"], verdict=derived["verdict"])
    passport["verdict"] = derived["verdict"]
    passport["files"] = dict(file_entries(run, reports=True))
    passport["content_sha256"] = content_sha256(passport)
    (run / "passport.json").write_text(json.dumps(passport))
    return passport  # type: ignore[no-any-return]
