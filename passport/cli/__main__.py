"""`python -m passport.cli`: the same as the `passport` command."""

import os
import sys

from passport.cli import main

os.environ.setdefault("PYTHONUNBUFFERED", "1")
sys.exit(main())
