"""WHAT IT MEANS: the passport model and JSON Schema, the run spec, metrics from raw logs,
validity rules, verification, reports and the CLI.

`passport.metrics` and `passport.verify` need only numpy/pyarrow and a run folder, so an
auditor can recompute results without the load generator or an endpoint.
"""

from passport._errors import PassportError, RunFolderError, SpecError
from passport._model import SCHEMA_VERSION, Passport
from passport._passport import read_passport, write_passport
from passport._run import RunOutcome, execute
from passport._spec import RunSpec, load_spec, parse_spec

__all__ = [
    "Passport",
    "PassportError",
    "RunFolderError",
    "RunOutcome",
    "RunSpec",
    "SCHEMA_VERSION",
    "SpecError",
    "execute",
    "load_spec",
    "parse_spec",
    "read_passport",
    "write_passport",
]
