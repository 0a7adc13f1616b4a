"""The `passport` command line (`passport.cli:console`, or `python -m passport.cli`): the parser,
one module per command, one `ExitCode`. The only place that prints to the user."""

from passport.cli._exit import ExitCode
from passport.cli._main import console, main

__all__ = ["ExitCode", "console", "main"]
