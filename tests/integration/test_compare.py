"""`passport compare` on runs against simulated engines with known timings."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conftest import SimFactory, only_run_dir, run_cli
from tests.integration.test_faults import _spec

LOAD = {"pattern": "closed", "concurrency": 4, "measure": {"requests": 40}}


def _run(simulator: SimFactory, write_spec: Callable[..., Path], out: Path, ttft_ms: int,
         output_tokens: int = 8) -> Path:
    # the same simulator seed draws the same scripted delays, request by request
    url = simulator("--ttft-ms", str(ttft_ms), "--ttft-jitter-ms", "5", "--itl-ms", "3", "--seed", "7")
    workload = {"tokenizer": "none", "input_tokens": {"dist": "fixed", "value": 8},
                "output_tokens": {"dist": "fixed", "value": output_tokens}}
    spec = write_spec(_spec(url, LOAD, workload=workload), name=f"{out.name}.yaml")
    result = run_cli("run", str(spec), "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    return only_run_dir(out)


def _verdicts(stdout: str) -> dict[str, str]:
    rows = {}
    for line in stdout.splitlines():
        parts = line.split()
        if parts and parts[0].count(".") >= 1 and (parts[0].endswith((".p50", ".p99", ".mean"))):
            rows[parts[0]] = line[line.index("too few"):] if "too few" in line else line.split("  ")[-1].strip()
    return rows


def test_a_known_ttft_difference_is_significant_and_identical_engines_are_not(
    simulator: SimFactory, write_spec: Callable[..., Path], tmp_path: Path
) -> None:
    base = _run(simulator, write_spec, tmp_path / "base", ttft_ms=30)
    same = _run(simulator, write_spec, tmp_path / "same", ttft_ms=30)
    slow = _run(simulator, write_spec, tmp_path / "slow", ttft_ms=45)
    result = run_cli("compare", str(base), str(same), str(slow))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[:6] == [f"{'same':<8} {name}" for name in
                                              ("model", "precision", "decoding", "workload", "load", "window")]
    tables = result.stdout.split(" against ")
    same_rows, slow_rows = _verdicts(tables[1]), _verdicts(tables[2])
    # Ground truth is the script: TTFT 30 or 45 ms (5 ms jitter), ITL 3 ms for all; the identical
    # pair differs in nothing, the slow one by +15 ms TTFT and e2e, and its throughput falls to
    # 51/66 (-23 %) of the base's
    # A difference under the 10 % minimum effect may be real on a loaded machine (the loop's own
    # scheduling shifts a chunk by tens of microseconds) but is never called a change
    unchanged = {"no significant difference", "no meaningful difference (< 10%)"}
    assert set(same_rows.values()) <= unchanged | {"too few samples for p99 (need 368, have 40)",
                                                   "too few samples for p99 (need 368, have 280)"}, same_rows
    assert slow_rows["ttft.any.p50"] == "slower" and slow_rows["ttft.content.p50"] == "slower"
    assert slow_rows["e2e.p50"] == "slower"
    assert slow_rows["itl.chunk.p50"] in unchanged and slow_rows["tpot.p50"] in unchanged
    assert slow_rows["throughput.requests_per_s.mean"] in {"lower"} | unchanged
    assert result.stdout.rstrip().endswith("Result: COMPARABLE")


def test_different_workloads_are_not_comparable_unless_allowed(
    simulator: SimFactory, write_spec: Callable[..., Path], tmp_path: Path
) -> None:
    base = _run(simulator, write_spec, tmp_path / "base", ttft_ms=30)
    longer = _run(simulator, write_spec, tmp_path / "longer", ttft_ms=30, output_tokens=16)
    refused = run_cli("compare", str(base), str(longer))
    assert refused.returncode == 1
    assert any(line.startswith("DIFFERS  workload: ") for line in refused.stdout.splitlines())
    assert refused.stdout.rstrip().endswith("Result: NOT COMPARABLE (pass --allow FIELD to compare anyway)")
    allowed = run_cli("compare", str(base), str(longer), "--allow", "workload")
    assert allowed.returncode == 0
    assert "ALLOWED  workload:" in allowed.stdout and "compared anyway, allowing: workload" in allowed.stdout
    bad = run_cli("compare", str(base), str(longer), "--allow", "colour")
    assert bad.returncode == 2 and "--allow 'colour': not a comparability field" in bad.stderr
