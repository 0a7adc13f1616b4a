"""The stress tier (`./scripts/test.sh --stress`): the fast and integration tiers run as CI runs
them (two xdist workers, one file per worker) while the machine is made busy on purpose: one
spinning process per core and a second pytest process that runs the fast tier over and over.

It proves that no verdict of the suite moves with the machine's load: a test that passes on a
quiet machine and fails here asserts something the load changes (a timing, a rate, a judgment
on too few samples) and must take its truth from the server's own record, state and size its
false-failure rate (tests/STATISTICAL.md), or move to benchmarks/.

It passes when the main run passes and every round of the second pytest process that finished
passed too (the round the main run's end interrupts is not counted). Extra arguments go to the
main pytest run. Linux or macOS; expects .venv/ set up (scripts/test.sh does that first).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.simulator import cpu_hog

REPO = Path(__file__).resolve().parent.parent
FAST = "not e2e and not ray and not slow"
TIERS = "not e2e and not ray"  # the fast tier and the integration tier (the simulated engine's slow runs)


def _select(base: str) -> str:
    cache = Path(os.environ.get("PASSPORT_CACHE", Path.home() / ".cache" / "passport"))
    return base if (cache / "models" / "gemma-3-270m-q4_k_m.gguf").is_file() else f"{base} and not model"


def _load_round(python: str, scratch: Path, round_no: int) -> subprocess.Popen[bytes]:
    """One round of the fast tier in its own process, its own temporary folder and signing keys,
    quiet but for its closing lines (kept in scratch/round-N.log)."""
    env = {**os.environ, "TMPDIR": str(scratch), "PASSPORT_KEY_DIR": str(scratch / "keys")}
    command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", str(scratch / f"round-{round_no}"),
               "-m", _select(FAST)]
    with (scratch / f"round-{round_no}.log").open("wb") as log:
        return subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)


def main(argv: list[str]) -> int:
    python = sys.executable
    scratch = Path(tempfile.mkdtemp(prefix="passport-stress-"))
    started = time.monotonic()
    rounds: list[tuple[int, int]] = []  # (round, exit code) of each finished round
    with cpu_hog() as cores:
        print(f"stress: {cores} CPU hog(s) and a second pytest process (the fast tier, round after round) "
              f"beside the run; their logs in {scratch}", flush=True)
        load = _load_round(python, scratch, 1)
        main_run = subprocess.Popen([python, "-m", "pytest", "-n", os.environ.get("PASSPORT_TEST_WORKERS", "2"),
                                     "--dist", "loadfile", "-m", _select(TIERS), *argv], cwd=REPO)
        try:
            while main_run.poll() is None:
                if load.poll() is not None:
                    rounds.append((len(rounds) + 1, load.returncode))
                    load = _load_round(python, scratch, len(rounds) + 1)
                time.sleep(0.5)
        finally:
            if load.poll() is None:
                os.killpg(load.pid, signal.SIGKILL)  # the round and every process it started
            if main_run.poll() is None:
                main_run.terminate()
            load.wait()
            main_run.wait()
    failed = [n for n, code in rounds if code != 0]
    minutes = (time.monotonic() - started) / 60
    logs = " (" + ", ".join(str(scratch / f"round-{n}.log") for n in failed) + ")" if failed else ""
    print(f"stress: main run exit {main_run.returncode}; second pytest process: {len(rounds)} round(s) finished, "
          f"{len(failed)} failed{logs}; {minutes:.1f} min", flush=True)
    if main_run.returncode != 0:
        return main_run.returncode
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
