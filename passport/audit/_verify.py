"""`passport verify RUN_DIR`: recompute everything derivable in a passport and check every hash.

For auditors: it reads `passport.json` as plain JSON and checks, field by field:
- the content hash over the passport's canonical form (schema 1.3 on): a hand edit of any field
  is caught, even one nothing recomputes;
- the sha256, size and rows of every file the passport lists (raw files, reports, probes);
- that the SLOs and discard rules in the protocol are those frozen in declared.json before the
  first timed request;
- results and the verdict, re-derived from the raw files with `derive`, the function the run
  itself used; from schema 1.3 on also the counts, the canary section and every validity rule
  (status, measured value, threshold);
- the raw tables against each other in a finished run, and the signature (schema 1.4 on).
numpy and pyarrow only; nothing from the load generator. Reports are re-rendered and identity
is replayed from probes.jsonl by the CLI (`passport verify`), which has the libraries for that.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from passport._errors import RunFolderError
from passport._input import read_bounded
from passport.audit._declared import DECLARED_FILE
from passport.audit._derive import RunState, derive
from passport.audit._files import RunFiles, content_sha256, file_entries, not_inside, sha256_file
from passport.audit._signature import signature_problem
from passport.audit._versions import (
    DERIVED_VALIDITY_SINCE,
    SIGNED_SINCE,
    SUPPORTED_SCHEMA_VERSIONS,
    downgrade_problem,
    version_tuple,
)

__all__ = ["Verification", "verify_run", "diff_values", "read_passport_json", "RESULTS_ADDED_IN_1_2", "run_state",
           "verdict_problems", "signature_problems"]

RESULTS_ADDED_IN_1_2 = ("lengths", "sessions", "checks", "shapes")
# No passport comes near this (a 10,000-request run's is under 1 MiB): a larger file is refused
# before it is read, where a 1 GB one exhausted memory.
MAX_PASSPORT_BYTES = 64 * 2**20


def _explanation(key: str) -> bool:
    """Free text (`reason`, `energy_reason`, a rule's `message` and `recommendation`) explains a
    figure; its wording may change between harness versions, so it is not compared (from schema
    1.3 on the content hash still covers it)."""
    return key in ("reason", "message", "recommendation") or key.endswith("_reason")


def diff_values(expected: Any, actual: Any, path: str = "results") -> list[str]:
    """Differences between two JSON-like values; floats equal within 1e-9 relative; explanations
    are skipped."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out: list[str] = []
        for key in sorted(set(expected) | set(actual)):
            if _explanation(key):
                continue
            if key not in actual:
                if expected[key] is not None:
                    out.append(f"{path}.{key}: in the passport ({expected[key]!r}) but not recomputed")
            elif key not in expected:
                if actual[key] is not None:
                    out.append(f"{path}.{key}: recomputed as {actual[key]!r} but missing from the passport")
            else:
                out += diff_values(expected[key], actual[key], f"{path}.{key}")
        return out
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{path}: {len(expected)} items in the passport, {len(actual)} recomputed"]
        return [d for i, (e, a) in enumerate(zip(expected, actual)) for d in diff_values(e, a, f"{path}[{i}]")]
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)) and not isinstance(expected, bool):
        if math.isclose(float(expected), float(actual), rel_tol=1e-9, abs_tol=1e-12):
            return []
    elif expected == actual:
        return []
    return [f"{path}: passport says {expected!r}, raw logs give {actual!r}"]


def _check_declarations(run_dir: Path, passport: dict[str, Any]) -> list[str]:
    """The passport's SLOs and discard rules must be those frozen in declared.json before the run."""
    effective = (passport.get("protocol") or {}).get("effective") or {}
    declared_info = (passport.get("protocol") or {}).get("declared")
    path = run_dir / DECLARED_FILE
    if not path.is_file():
        if effective.get("slo") or effective.get("discard"):
            return [f"the protocol declares SLOs or discard rules but {DECLARED_FILE} is missing: nothing shows "
                    "they were declared before the run, and results are recomputed without them"]
        return []
    problems = []
    if declared_info and sha256_file(path) != declared_info.get("sha256"):
        problems.append(f"{DECLARED_FILE}: sha256 differs from protocol.declared (the declarations were changed)")
    frozen = json.loads(path.read_text()).get("spec") or {}
    for key in ("slo", "discard"):
        if (effective.get(key) or None) != (frozen.get(key) or None):
            problems.append(f"protocol.effective.{key} is {effective.get(key)!r} but {DECLARED_FILE}, written before "
                            f"the first timed request, declares {frozen.get(key)!r}: rules added after the run "
                            "are not applied")
    return problems


def read_passport_json(path: Path, sealed: bool = False) -> dict[str, Any]:
    """A passport.json (or a run folder's) as plain JSON; RunFolderError when there is none this
    version of passport reads (missing, not JSON, of an unknown schema version) and, with
    `sealed`, when its content hash says it was edited after it was written."""
    path = Path(path)
    if path.is_dir():
        path = path / "passport.json"
    try:
        data = read_bounded(path, "passport", MAX_PASSPORT_BYTES)
    except OSError as exc:
        if (path.parent / "passport.draft.json").is_file():
            raise RunFolderError(f"{path.parent} has no passport.json but a passport.draft.json: the run was "
                                 "killed before it finished; `passport recover` writes its passport") from exc
        raise RunFolderError(f"cannot read {path}: {exc.strerror}; give a run folder (results/<run>/)") from exc
    except ValueError as exc:  # not a regular file, or over the size a passport may have
        raise RunFolderError(str(exc)) from None
    try:
        passport = json.loads(data)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise RunFolderError(f"{path} is not valid JSON: {exc}") from None
    version = passport.get("schema_version") if isinstance(passport, dict) else None
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        raise RunFolderError(f"{path}: passport schema_version {version!r} is not supported by this passport "
                             f"(knows {', '.join(SUPPORTED_SCHEMA_VERSIONS)}); upgrade passport")
    if sealed and passport.get("content_sha256") is not None and passport["content_sha256"] != content_sha256(passport):
        raise RunFolderError(f"{path} was edited after it was written (its content hash differs); "
                             f"`passport verify {path.parent}` shows what")
    return dict(passport)


@dataclass
class Verification:
    """What verify found: `problems` (empty: verified), what it `checked`, and whether the
    passport carries a signature (`signed`; whether it checks is among the problems)."""

    problems: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    signed: bool = False


def _check_files(run_dir: Path, passport: dict[str, Any], whole_table: bool) -> list[str]:
    """Each listed file against the folder; with `whole_table` (1.3 on, whose table lists the
    reports too) the table itself is recomputed: sizes, row counts, and files it does not list."""
    problems = []
    listed = passport.get("files", {})
    for name, entry in listed.items():
        file_path = run_dir / name
        refusal = not_inside(run_dir, name)
        if refusal is not None:
            problems.append(f"{name}: {refusal}; not read")
        elif not file_path.is_file():
            problems.append(f"{name}: listed in the passport but missing")
        elif sha256_file(file_path) != entry["sha256"]:
            problems.append(f"{name}: sha256 differs from the passport (the file was changed)")
    if whole_table:
        present = file_entries(run_dir, reports=True)
        problems += [f"{name}: in the run folder but not listed in the passport" for name in present
                     if name not in listed]
        sizes = {k: {"bytes": v["bytes"], "rows": v["rows"]} for k, v in listed.items() if k in present}
        problems += diff_values(sizes, {k: {"bytes": v["bytes"], "rows": v["rows"]} for k, v in present.items()
                                        if k in sizes}, "files")
    return problems


def run_state(passport: dict[str, Any]) -> RunState:
    validity = passport.get("validity") or {}
    return RunState(complete=bool(validity.get("complete")), incomplete_reason=validity.get("incomplete_reason"),
                    forced=bool(validity.get("forced")), launched_engine=bool(validity.get("launched_engine")))


def _defined_only(results: dict[str, Any], passport: dict[str, Any]) -> dict[str, Any]:
    """`results` with only the metrics the passport defines (protocol.metric_definitions): a
    metric added to passport later is not expected of a passport written before it."""
    defined = (passport.get("protocol") or {}).get("metric_definitions")
    if not isinstance(defined, dict):
        return results
    for key in ("metrics", "metrics_failure_inclusive"):
        if isinstance(results.get(key), dict):
            results[key] = {k: v for k, v in results[key].items() if k in defined}
    return results


def _check_derived(files: RunFiles, passport: dict[str, Any]) -> list[str]:
    """Results, counts, canaries, rules and verdict of a 1.3+ passport against `derive`."""
    derived = derive(files, passport["protocol"], run_state(passport))
    recomputed = json.loads(json.dumps({
        "results": derived.results, "counts": derived.counts, "canaries": derived.canaries,
        "rules": derived.rules, "verdict": derived.verdict}))
    recomputed["results"] = _defined_only(recomputed["results"], passport)
    validity = passport.get("validity") or {}
    problems = diff_values(passport.get("results", {}), recomputed["results"])
    problems += diff_values(validity.get("counts"), recomputed["counts"], "validity.counts")
    problems += diff_values(validity.get("canaries"), recomputed["canaries"], "validity.canaries")
    problems += diff_values(validity.get("rules"), recomputed["rules"], "validity.rules")
    return problems + verdict_problems(passport, derived.verdict)


def _check_results(files: RunFiles, passport: dict[str, Any], version: str) -> list[str]:
    """Results and verdict of a passport older than 1.3: its rules are not compared (their set
    and wording changed since), but a verdict is a verdict."""
    derived = derive(files, passport["protocol"], run_state(passport))
    recomputed = _defined_only(json.loads(json.dumps(derived.results)), passport)
    if version in ("1.0", "1.1"):  # figures added in 1.2 were not part of these passports
        for key in RESULTS_ADDED_IN_1_2:
            recomputed.pop(key, None)
    return diff_values(passport.get("results", {}), recomputed) + verdict_problems(passport, derived.verdict)


def verdict_problems(passport: dict[str, Any], derived: str) -> list[str]:
    """Where the passport's verdict is not the one re-derived from its raw files."""
    return [f"{where}: passport says {value!r}, the raw logs and the rules give {derived!r}"
            for where, value in (("verdict", passport.get("verdict")),
                                 ("validity.verdict", (passport.get("validity") or {}).get("verdict")))
            if value != derived]


def signature_problems(passport: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    """The signature (schema 1.4 on, or whenever `keys` are required) against the content hash."""
    signed_since = version_tuple(str(passport["schema_version"])) >= version_tuple(SIGNED_SINCE)
    if signed_since and not passport.get("signature"):
        return ["passport.json: unsigned, though every passport of its schema version is signed (the signature "
                "was removed)"]
    problem = signature_problem(passport, keys)
    return [] if problem is None else [f"passport.json: {problem}"]


def verify_run(run_dir: Path, keys: tuple[str, ...] = ()) -> Verification:
    """Every difference between the passport and what its raw files say (see the module
    docstring); with `keys`, the passport must also be signed by one of those key fingerprints.
    Raises RunFolderError when `run_dir` holds no passport this verifier can read."""
    run_dir = Path(run_dir)
    passport = read_passport_json(run_dir)
    version = str(passport["schema_version"])
    derived_validity = version_tuple(version) >= version_tuple(DERIVED_VALIDITY_SINCE)
    out = Verification()
    downgrade = downgrade_problem(passport)
    if downgrade is not None:
        out.problems.append(f"passport.json: {downgrade}")
    if derived_validity:
        out.checked.append("content hash")
        if passport.get("content_sha256") != content_sha256(passport):
            out.problems.append("passport.json: content_sha256 differs from its content (the passport was edited "
                                "after it was written)")
    if passport.get("signature") or keys or version_tuple(version) >= version_tuple(SIGNED_SINCE):
        fingerprint = (passport.get("signature") or {}).get("fingerprint")
        out.checked.append(f"signature ({fingerprint})" if fingerprint else "signature")
        out.problems += signature_problems(passport, keys)
    out.signed = bool(passport.get("signature"))
    out.checked.append("files")
    out.problems += _check_files(run_dir, passport, derived_validity)
    out.checked.append("declarations")
    out.problems += _check_declarations(run_dir, passport)
    out.checked.append("raw tables against each other")
    files = RunFiles(run_dir)  # each table read once, for the checks and the re-derivation
    out.problems += _check_tables(files, passport)
    try:
        if derived_validity:
            out.checked += ["results", "counts", "canaries", "validity rules", "verdict"]
            out.problems += _check_derived(files, passport)
        else:
            out.checked += [f"results (schema {version}: rules predate re-derivation)", "verdict"]
            out.problems += _check_results(files, passport, version)
    except (OSError, KeyError, ValueError, TypeError) as exc:
        out.problems.append(f"cannot recompute: {exc}")
    return out


def _check_tables(files: RunFiles, passport: dict[str, Any]) -> list[str]:
    """The raw tables of a finished run against each other: every chunk belongs to a request and
    every answered request has as many chunks as it says; and where the schedule fixes the
    requests (an open loop, or a measured request count), every scheduled request of every
    repetition has its row, so rows dropped from requests.parquet (and every figure recomputed
    to match) are caught. A run that did not finish (killed, stopped, a full disk) may have lost
    what its buffers held; its passport says so, and these checks do not apply."""
    validity = passport.get("validity") or {}
    requests, chunks, schedule = (files.table(name, figures_only=True) for name in ("requests", "chunks", "schedule"))
    if requests is None or not validity.get("complete"):
        return []
    problems = []
    if chunks is not None and "n_chunks" in requests.column_names:
        problems += _chunk_problems(requests, chunks)
    effective = (passport.get("protocol") or {}).get("effective") or {}
    load = effective.get("load") or {}
    fixed = load.get("pattern") not in (None, "closed") or (load.get("measure") or {}).get("requests") is not None
    if schedule is None or not fixed:
        return problems
    planned = set(zip(schedule.column("seq").to_pylist(), schedule.column("phase").to_pylist()))
    seen = set(zip(requests.column("repetition").to_pylist(), requests.column("seq").to_pylist(),
                   requests.column("phase").to_pylist()))
    missing = [(rep, seq, phase) for rep in range(int(load.get("repetitions") or 1)) for seq, phase in planned
               if (rep, seq, phase) not in seen]
    if missing:
        problems.append(f"requests.parquet: {len(missing)} scheduled requests of a finished run have no row "
                        f"(repetition, seq, phase: {sorted(missing)[:5]}): rows were removed")
    return problems


def _ids(table: pa.Table) -> pa.Array:
    return pc.cast(table.column("request_id"), pa.int64()).combine_chunks()


def _chunk_problems(requests: pa.Table, chunks: pa.Table) -> list[str]:
    """Chunks against requests: every chunk has its request, every answered request has the
    chunks it counts, and its first and last token times are its token-bearing chunks' first and
    last arrivals (the recorder wrote both from the same reads: one column of requests.parquet
    edited, a TTFT shortened, is caught without any figure). Grouped and joined in Arrow: a
    Python pass per chunk took most of verify's time on a 100,000-request run."""
    problems = []
    ids, owners = _ids(requests), _ids(chunks)
    orphans = pc.unique(pc.filter(owners, pc.invert(pc.is_in(owners, value_set=ids)))).to_pylist()
    if orphans:
        problems.append(f"chunks.parquet: {len(orphans)} requests' chunks have no row in requests.parquet "
                        f"(request_id {sorted(orphans)[:5]})")
    timed = {"token_bearing", "recv_ns"} <= set(chunks.column_names)
    bearing = pc.and_(pc.fill_null(pc.cast(chunks.column("token_bearing"), pa.bool_()), False),
                      pc.is_valid(chunks.column("recv_ns"))) if timed else None
    per_request = pa.table({"request_id": owners, "one": pa.array(np.ones(len(owners), np.int64)),
                            "recv_ns": pc.cast(chunks.column("recv_ns"), pa.int64()).combine_chunks()
                            if "recv_ns" in chunks.column_names else pa.nulls(len(owners), pa.int64())})
    counted = per_request.group_by("request_id").aggregate([("one", "sum")])
    if bearing is not None:
        arrived = per_request.filter(bearing).group_by("request_id").aggregate([("recv_ns", "min"),
                                                                                  ("recv_ns", "max")])
    else:
        arrived = pa.table({"request_id": pa.array([], pa.int64()), "recv_ns_min": pa.array([], pa.int64()),
                            "recv_ns_max": pa.array([], pa.int64())})
    columns = {"request_id": ids, "row": pa.array(np.arange(len(ids), dtype=np.int64)),
               "n_chunks": pc.cast(requests.column("n_chunks"), pa.int64()),
               "http_status": pc.cast(requests.column("http_status"), pa.int64()),
               "outcome": requests.column("outcome")}
    for name in ("first_token_ns", "last_token_ns"):
        if name in requests.column_names:
            columns[name] = pc.cast(requests.column(name), pa.int64())
    joined = (pa.table(columns).join(counted, "request_id", join_type="left outer")
              .join(arrived, "request_id", join_type="left outer").sort_by("row"))
    # the chunks of an answered stream are recorded with it; a request cut off by the harness
    # (client_error: interrupted, a harness fault) keeps its count but not its chunks
    cut_off = pc.is_in(joined.column("outcome"), value_set=pa.array(["client_error", "interrupted"]))
    answered = pc.and_(pc.and_(pc.is_valid(joined.column("n_chunks")), pc.equal(joined.column("http_status"), 200)),
                       pc.invert(cut_off))
    miscounted = pc.fill_null(pc.and_(answered, pc.not_equal(pc.fill_null(joined.column("one_sum"), 0),
                                                               joined.column("n_chunks"))), False)
    wrong = pc.filter(joined.column("request_id"), miscounted).to_pylist()
    if wrong:
        problems.append(f"requests.parquet: {len(wrong)} requests say they had more or fewer chunks than "
                        f"chunks.parquet holds (request_id {wrong[:5]})")
    if bearing is None or "first_token_ns" not in columns or "last_token_ns" not in columns:
        return problems
    has_times = pc.is_valid(joined.column("recv_ns_min"))
    untimed = pc.and_(pc.invert(has_times), pc.is_null(joined.column("first_token_ns")))
    same = pc.fill_null(pc.and_(pc.equal(joined.column("first_token_ns"), joined.column("recv_ns_min")),
                                pc.equal(joined.column("last_token_ns"), joined.column("recv_ns_max"))), False)
    edited = pc.and_(pc.invert(miscounted), pc.invert(pc.or_(untimed, same)))
    edited_ids = pc.filter(joined.column("request_id"), edited).to_pylist()
    if edited_ids:
        problems.append(f"requests.parquet: {len(edited_ids)} requests' first or last token time is not their first "
                        f"or last token-bearing chunk's arrival in chunks.parquet (request_id {edited_ids[:5]}): a "
                        "time was edited")
    return problems
