"""How the coordinator names the workers' stop reasons: a saturation stop keeps its prefix (the
run's verdict is then SATURATED), any other reason says which worker it came from."""

from __future__ import annotations

from passport.audit import SATURATED_PREFIX
from passport.run._fleet import combine_reports


def test_a_worker_saturation_stop_keeps_its_prefix_and_names_the_worker() -> None:
    reports = {0: ([(0, 10, 1)], None), 1: ([(0, 12, 1)], SATURATED_PREFIX + "2.4 s into the measured window")}
    results, reason = combine_reports(reports, [])
    assert reason == SATURATED_PREFIX + "worker 1: 2.4 s into the measured window"
    assert [(r.repetition, r.sent) for r in results] == [(0, 22)]
    _, other = combine_reports({0: ([], "the endpoint refused 20 connections")}, [])
    assert other == "worker 0: the endpoint refused 20 connections"
    _, first = combine_reports(reports, ["interrupted by SIGINT"])  # the coordinator's own reason comes first
    assert first == "interrupted by SIGINT"
