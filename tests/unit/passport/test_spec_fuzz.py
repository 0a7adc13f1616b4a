"""Property-based tests of the spec loader: whatever a file holds, the answer is a spec or one
SpecError, never another exception.

Three generators: raw bytes (binary, UTF-16, broken YAML); YAML documents of random nesting and
scalar types; and a valid spec with one field, at any depth, replaced by a random value (the
case users meet: a typo, a string for a number, inf, a list for a mapping).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from passport import SpecError
from passport.model import load_spec

FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

VALID: dict[str, Any] = {
    "name": "fuzz",
    "endpoint": {"base_url": "http://127.0.0.1:8080/v1", "api": "completions"},
    "workload": {"tokenizer": "none", "input_tokens": {"dist": "fixed", "value": 8},
                 "output_tokens": {"dist": "normal", "mean": 16, "std": 2}},
    "load": {"pattern": "poisson", "rate_per_s": 4, "measure": {"duration_s": 10},
             "on_reject": {"retry": "honour_retry_after"}},
    "timeouts": {"total_s": 60},
    "limits": {"bytes_per_event": 65536},
    "validity": {"max_error_rate": 0.01},
}

scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                   st.text(max_size=20), st.integers(min_value=10**12, max_value=10**30))
value = st.recursive(scalar, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.dictionaries(st.text(max_size=10), inner, max_size=4)),
                     max_leaves=12)


def _paths(tree: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every key's path in `tree`, mappings and leaves alike."""
    found: list[tuple[str, ...]] = []
    for key, sub in tree.items():
        found.append((*prefix, key))
        if isinstance(sub, dict):
            found += _paths(sub, (*prefix, key))
    return found


PATHS = _paths(VALID)


def _load(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(data)
    try:
        load_spec(path)
    except SpecError as exc:
        message = str(exc)
        assert message and "Traceback" not in message


@FUZZ
@given(data=st.one_of(st.binary(max_size=300), st.text(max_size=300).map(lambda t: t.encode("utf-16")),
                      st.text(max_size=300).map(str.encode)))
def test_any_bytes_are_a_spec_or_one_spec_error(tmp_path: Path, data: bytes) -> None:
    _load(tmp_path, data)


@FUZZ
@given(document=value)
def test_any_yaml_document_is_a_spec_or_one_spec_error(tmp_path: Path, document: Any) -> None:
    _load(tmp_path, yaml.safe_dump(document).encode())


@FUZZ
@given(where=st.sampled_from(PATHS), replacement=value, extra_key=st.booleans())
def test_a_valid_spec_with_one_field_replaced_is_a_spec_or_names_that_field(
    tmp_path: Path, where: tuple[str, ...], replacement: Any, extra_key: bool
) -> None:
    spec = copy.deepcopy(VALID)
    parent = spec
    for key in where[:-1]:
        parent = parent[key]
    if extra_key:
        parent[where[-1] + "_x"] = replacement
    else:
        parent[where[-1]] = replacement
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    try:
        load_spec(path)
    except SpecError as exc:
        named = ".".join(where[:-1] + ((where[-1] + "_x",) if extra_key else (where[-1],)))
        # the message names the field (or, for a replaced mapping, a field inside it)
        assert named.split(".")[0] in str(exc), (named, str(exc))


def test_the_unmodified_spec_is_valid(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(VALID))
    spec, _ = load_spec(path)
    assert spec.load.rate_per_s == 4
