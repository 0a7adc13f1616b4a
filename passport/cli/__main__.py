"""`python -m passport.cli`: the same as the `passport` command."""

import os

from passport.cli import console

os.environ.setdefault("PYTHONUNBUFFERED", "1")
console()
