"""What several commands share: the endpoint options, a spec with its command-line overrides,
and the progress bars and status lines of long commands (none with --quiet)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from passport.model import Override, RunSpec

__all__ = ["add_endpoint_options", "load_spec_with_overrides", "Printer", "RichProgress"]


def add_endpoint_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("--endpoint", metavar="URL", help="override endpoint.base_url, e.g. http://127.0.0.1:8000/v1")
    command.add_argument("--api-key-env", metavar="NAME",
                         help="override endpoint.api_key_env: the environment variable holding the API key")
    command.add_argument("--out", type=Path, default=Path("results"), metavar="DIR",
                         help="output folder (default: results/)")
    command.add_argument("--quiet", action="store_true", help="no progress bar or status lines")


def load_spec_with_overrides(args: argparse.Namespace) -> tuple[RunSpec, dict[str, Any], dict[str, Any],
                                                                 list[Override]]:
    """(spec, the YAML as written, the YAML with command-line overrides, the overrides)."""
    from passport._errors import SpecError
    from passport.model import Override, load_spec, parse_spec

    spec, raw = load_spec(args.spec)
    overrides: list[Override] = []
    merged = dict(raw)

    def patch(section: str, key: str, value: Any, flag: str) -> None:
        merged[section] = {**(merged.get(section) or {}), key: value}
        overrides.append(Override(field=f"{section}.{key}", value=value, source=flag))

    if args.endpoint:
        patch("endpoint", "base_url", args.endpoint, "--endpoint")
    if args.api_key_env:
        patch("endpoint", "api_key_env", args.api_key_env, "--api-key-env")
    if getattr(args, "vary", None):
        patch("sweep", "vary", args.vary, "--vary")
    if getattr(args, "levels", None):
        try:
            levels: Any = "auto" if args.levels == "auto" else [float(x) for x in args.levels.split(",")]
        except ValueError:
            raise SpecError(f"--levels {args.levels!r}: write ascending numbers separated by commas, "
                            "e.g. 1,2,4,8, or auto") from None
        patch("sweep", "levels", levels, "--levels")
    if overrides:
        spec = parse_spec(merged, str(args.spec))
    return spec, raw, merged, overrides


class RichProgress:
    """Adapts rich's progress bar to the runner's ProgressSink."""

    def __init__(self, total: int | None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn("[bold]requests"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(), console=Console(stderr=True), transient=False,
        )
        self._task = self._progress.add_task("run", total=total, detail="")
        self._progress.start()

    def update(self, done: int, in_flight: int, errors: int) -> None:
        self._progress.update(self._task, completed=done, detail=f"in flight {in_flight}, errors {errors}")

    def stop(self) -> None:
        self._progress.stop()


class Printer:
    """Progress bars and status lines for the run and sweep commands (none with --quiet)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.bars: list[RichProgress] = []

    def progress(self, total: int | None) -> RichProgress:
        bar = RichProgress(total)
        self.bars.append(bar)
        return bar

    def status(self, message: str) -> None:
        from harness import scrub

        print(f"passport: {scrub(message)}", file=sys.stderr, flush=True)

    def kwargs(self) -> dict[str, Any]:
        return {} if self.quiet else {"progress": self.progress, "status": self.status}

    def __enter__(self) -> Printer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for bar in self.bars:
            bar.stop()
