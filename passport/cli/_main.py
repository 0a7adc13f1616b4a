"""The `passport` command line: the only place that prints to the user or picks exit codes.

One module per command (`_cmd_<name>.py`: its arguments and its action), a dispatch table, and
one `ExitCode` for all. Commands import what they need when they run, so `passport --help`
loads argparse and nothing heavy. Library errors are caught here, once: ours are a usage or
input error (exit 2, one line on stderr), a Ctrl-C before the timed phase exits 1.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable
from types import FrameType, ModuleType

from passport.cli import (
    _cmd_calibrate,
    _cmd_campaign,
    _cmd_canary,
    _cmd_capacity,
    _cmd_compare,
    _cmd_export,
    _cmd_gate,
    _cmd_history,
    _cmd_ledger,
    _cmd_probe,
    _cmd_recover,
    _cmd_run,
    _cmd_show,
    _cmd_sweep,
    _cmd_verify,
    _cmd_workload,
)
from passport.cli._exit import ExitCode
from passport.cli._failure import DEBUG_ENV, debug_asked, report_crash
from passport.cli._terminal import guarded_terminal
from passport.cli._version import version

__all__ = ["main", "console", "COMMANDS"]

EPILOG = """\
exit codes:
  0  VALID run (verify: verified; gate: every condition met; canary: every case passed)
  1  INVALID, HOLD, INCOMPLETE or SATURATED run (verify: differences found; gate: a condition failed;
     canary: a case failed)
  2  usage or input error: bad spec, unreadable run folder, unreachable endpoint, engine failed
     to start
  3  internal error, or a run that failed after it began to record: the message says where the
     records are and how to finish (passport recover RUN_DIR); the traceback is in error.log
     (--debug, or PASSPORT_DEBUG=1, prints it)

examples:
  passport run specs/llamacpp-smoke.yaml
  passport run my.yaml --endpoint http://127.0.0.1:8000/v1
  passport run --endpoint http://127.0.0.1:8000/v1 --concurrency 8 --num-prompts 200 --input-len 512 --output-len 128
  OPENAI_API_KEY=... passport run my.yaml --endpoint https://api.example.com/v1 --api-key-env OPENAI_API_KEY
  passport sweep specs/llamacpp-sweep.yaml
  passport campaign specs/llamacpp-campaign.yaml
  passport canary --endpoint http://127.0.0.1:8080/v1 --suite default --junit canaries.xml
  passport probe http://127.0.0.1:8080/v1
  passport capacity --kv-pool-gib 23.3 --kv-kib-per-token 64 --context 32768
  passport verify results/chat-smoke-20261129T170000Z-1a2b3c4d
  passport gate results/chat-smoke-... --require 'ttft.any.p99 < 2s' --require 'error_rate < 0.5%'
  passport export results/chat-smoke-... --format jsonl > requests.jsonl
"""

# In the order `--help` lists them.
COMMANDS: dict[str, ModuleType] = {
    "run": _cmd_run, "sweep": _cmd_sweep, "campaign": _cmd_campaign, "canary": _cmd_canary, "workload": _cmd_workload,
    "probe": _cmd_probe, "capacity": _cmd_capacity, "calibrate": _cmd_calibrate, "verify": _cmd_verify,
    "recover": _cmd_recover, "gate": _cmd_gate, "ledger": _cmd_ledger, "history": _cmd_history,
    "compare": _cmd_compare, "show": _cmd_show, "export": _cmd_export,
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="passport",
        description="Benchmark an OpenAI-compatible LLM endpoint and write a benchmark passport: "
                    "identity, protocol, validity and results, beside the raw Parquet logs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"passport {version()}")
    debug_help = f"on an internal error, print the traceback too (or set {DEBUG_ENV}=1); it is always written to a log"
    parser.add_argument("--debug", action="store_true", help=debug_help)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS.values():
        module.add(sub, EPILOG)
    for command in sub.choices.values():  # `passport run --debug ...` as well as `passport --debug run ...`
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=debug_help)
    return parser


def _dispatch(handler: Callable[[argparse.Namespace], ExitCode], args: argparse.Namespace) -> ExitCode:
    try:
        return handler(args)
    except KeyboardInterrupt:
        print("ERROR: interrupted before anything was timed; nothing was measured", file=sys.stderr)
        return ExitCode.FAILED
    except BrokenPipeError:
        # `passport probe --json | head`: the reader left; what it took was what it wanted. Point
        # stdout at /dev/null so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.OK
    except Exception as exc:
        from passport._errors import PassportError

        if not isinstance(exc, PassportError):  # a defect, or a run that failed after it began to record
            return report_crash(exc, args.command, debug_asked(args.debug))
        # The load generator's names are imported only now: a command that needs none (capacity,
        # --help) never loads it.
        from harness import EngineLaunchError, scrub

        prefix = "the engine did not start: " if isinstance(exc, EngineLaunchError) else ""
        print(f"ERROR: {prefix}{scrub(str(exc))}", file=sys.stderr)
        return ExitCode.USAGE


def _unrecognized(parser: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]) -> None:
    """Exit 2 on arguments no parser took, with the usage of the command they were given to (not
    the top level's) and the options closest to the first unknown one."""
    import difflib

    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    command = commands.choices.get(args.command, parser) if args.command else parser
    options = [s for action in command._actions for s in action.option_strings]  # noqa: SLF001
    unknown = next((e for e in extra if e.startswith("-")), extra[0]).split("=", 1)[0]
    close = difflib.get_close_matches(unknown, options, n=3, cutoff=0.6)
    command.error(f"unrecognized arguments: {' '.join(extra)}" + (f" (did you mean {' or '.join(close)}?)" if close
                                                                    else f" (see {command.prog} --help)"))


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupt)  # a CI runner's SIGTERM is a Ctrl-C, not a silent death
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        _unrecognized(parser, args, extra)
    if args.command is None:
        parser.print_help()
        return ExitCode.USAGE
    with guarded_terminal():  # no escape sequence a server wrote reaches a terminal
        return int(_dispatch(COMMANDS[args.command].main, args))


def console() -> None:
    """The `passport` command's entry point: `main`, then the interpreter's own exit steps (the
    threads' exit hooks and the join of those not daemons, the atexit handlers, flushing stdout
    and stderr) and `os._exit`. What it skips is the native teardown of Arrow's and DuckDB's
    thread pools, which now and then aborts a finished command with "terminate called without an
    active exception" (SIGABRT, exit -6: apache/arrow#34314), turning a verdict a CI system gates
    on into a crash. `main` stays the function to call from Python: it returns and never ends the process."""
    import atexit
    import threading

    code = main()
    # the interpreter's own first exit step: the threads' exit hooks (concurrent.futures ends the
    # idle threads of every pool no one shut down), then the join of every thread not a daemon;
    # a join of its own without the hooks waited forever on such a thread
    threading._shutdown()  # type: ignore[attr-defined]  # noqa: SLF001
    atexit._run_exitfuncs()  # noqa: SLF001 - the same handlers the interpreter would run
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that left, or a stream already closed
            pass
    os._exit(code)
