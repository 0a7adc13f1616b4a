"""The README and the documentation site cannot drift from the code (issue 42): the reference
pages are generated from it and refuse an undocumented flag, spec field or rule; every `passport`
command shown in a shell block parses with the real parser; every YAML spec shown is one
`passport run` accepts; the README stays a front page."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, Field

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import docs_reference  # noqa: E402  (scripts/ is not a package)

_BLOCK = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
_SHELL = ("bash", "sh", "shell", "console", "")
_STOP = {">", ">>", "|", "&&", "||", ";", "&", "2>", "2>&1"}


def doc_files() -> list[Path]:
    """README.md and every hand-written page under docs/ (the generated ones come from the code)."""
    generated = {REPO / "docs" / name for name in docs_reference.pages()}
    return [REPO / "README.md", *(p for p in sorted((REPO / "docs").rglob("*.md")) if p not in generated)]


def blocks(langs: tuple[str, ...]) -> Iterator[tuple[Path, str]]:
    for path in doc_files():
        for match in _BLOCK.finditer(path.read_text()):
            if match.group(1) in langs:
                yield path, match.group(2)


def passport_commands() -> Iterator[tuple[Path, list[str]]]:
    """Each `passport ...` command line of a shell block, as the argv after `passport`."""
    for path, body in blocks(_SHELL):
        for line in body.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            if not line or line.startswith(("passport:", "#", "eval ")) or "$GATE" in line:
                continue
            try:
                words = shlex.split(line)
            except ValueError:
                continue
            while words and re.match(r"^[A-Z_]+=", words[0]):  # VAR=value passport ...
                words = words[1:]
            start = next((i for i, w in enumerate(words) if w.endswith("/passport") or w == "passport"), None)
            if start is None or (start > 0 and words[start - 1] not in ("time", "exec")):
                continue
            argv = []
            for word in words[start + 1:]:
                if word in _STOP or word.startswith((">", "2>")):
                    break
                argv.append(word)
            yield path, argv


def test_the_readme_is_a_front_page() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert "./scripts/demo.sh     # 1." in readme and "./scripts/test.sh     # 2." in readme
    assert re.search(r"^\.venv/bin/passport run --endpoint \S+ --max-concurrency", readme, re.M)  # vLLM's words
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (REPO / link).is_file(), link


def test_every_passport_command_shown_parses_with_the_real_parser() -> None:
    from passport.cli._main import _parser

    seen = 0
    for path, argv in passport_commands():
        if not argv or argv[0] in ("--help", "--version") or argv[-1] == "--help":
            continue
        errors = io.StringIO()
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            try:
                _parser().parse_args(argv)
            except SystemExit as exc:
                assert exc.code == 0, f"{path.relative_to(REPO)}: passport {' '.join(argv)}\n{errors.getvalue()}"
        seen += 1
    assert seen >= 20, seen  # the scan finds the commands, not nothing


def _as_spec(document: dict[str, Any]) -> dict[str, Any]:
    """A spec shown whole, or a fragment of one (a section or two): completed with an endpoint
    and a load where it lacks them."""
    return {"endpoint": {"base_url": "http://127.0.0.1:8000/v1"},
            "load": {"pattern": "closed", "concurrency": 1, "measure": {"requests": 1}}, **document}


def test_every_yaml_spec_shown_is_one_passport_accepts(tmp_path: Path) -> None:
    from passport.model import load_campaign, parse_spec

    checked = 0
    for path, body in blocks(("yaml",)):
        documents = list(yaml.safe_load_all(body))
        where = f"{path.relative_to(REPO)}:\n{body}"
        assert all(isinstance(d, dict) for d in documents), where
        if all("apiVersion" in d and "kind" in d for d in documents):  # Kubernetes manifests
            continue
        assert len(documents) == 1, where
        document = documents[0]
        if "require" in document or "cases" in document:  # a gate file, a canary suite
            continue
        if "arms" in document:
            spec = tmp_path / "campaign.yaml"
            spec.write_text(body)
            load_campaign(spec)
        else:
            parse_spec(_as_spec(document))
        checked += 1
    assert checked >= 5, checked


def test_the_reference_pages_hold_every_command_field_rule_and_metric() -> None:
    from passport.audit import METRICS
    from passport.audit._validity import RULE_DOCS
    from passport.cli._main import COMMANDS
    from passport.model import RunSpec

    pages = docs_reference.pages()
    assert all(f"## `passport {name}`" in pages["reference/cli.md"] for name in COMMANDS)
    cli = pages["reference/cli.md"]
    assert "### `passport ledger add`" in cli and "`--allow-unsigned`" in cli
    assert all(f"| `{field}` |" in pages["reference/spec.md"] for field in RunSpec.model_fields)
    assert all(f"| `{name}` |" in pages["reference/rules.md"] for name in RULE_DOCS)
    assert all(f"| `{metric}` |" in pages["reference/metrics.md"] for metric in METRICS)
    assert {"engines/vllm.md", "engines/sglang.md", "engines/trtllm.md", "engines/llamacpp.md", "engines/mlx.md",
            "engines/tgi.md", "engines/ollama.md", "engines/managed.md"} <= set(pages)
    assert "`vllm:generation_tokens_total`" in pages["engines/vllm.md"]
    faults = pages["concepts/faults.md"]
    for _, _, proven_by in docs_reference.declared_faults():
        test_path, name = proven_by.strip("`").split("::")
        assert f"def {name}(" in (REPO / test_path).read_text() and proven_by in faults


def test_every_rule_the_code_can_emit_is_documented_and_nothing_else() -> None:
    from passport.audit._validity import RULE_DOCS

    assert docs_reference.rule_names() == set(RULE_DOCS)


def test_a_flag_without_help_or_a_field_without_a_description_fails_the_build() -> None:
    parser = argparse.ArgumentParser(prog="x")
    parser.add_argument("--documented", help="says what it does")
    parser.add_argument("--silent")
    with pytest.raises(docs_reference.Undocumented, match="--silent: no help text"):
        docs_reference._flag_rows(parser, "x")

    class Spec(BaseModel):
        said: int = Field(1, description="a field that says what it is")
        unsaid: int = 2

    with pytest.raises(docs_reference.Undocumented, match="Spec.unsaid: no description"):
        docs_reference._schema_tables(Spec.model_json_schema(), "Spec", strict=True)
    assert docs_reference._schema_tables(Spec.model_json_schema(), "Spec", strict=False)  # the passport's own


def test_a_new_fault_declaration_appears_in_the_generated_matrix() -> None:
    rows = docs_reference.declared_faults()
    page = docs_reference.faults_page([*rows, ("a | piped case", "does a thing", "`tests/x.py::test_x`")])
    assert "| a \\| piped case | does a thing | `tests/x.py::test_x` |" in page
    assert {"tests/integration/test_hostile.py", "tests/integration/test_faults.py", "tests/unit/test_sandbox.py"} \
        <= {proven_by.strip("`").split("::")[0] for _, _, proven_by in rows}


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict`: a broken link, a missing page or an undocumented flag fails it."""
    from mkdocs.commands.build import build  # the docs extra, which scripts/setup.sh --test installs
    from mkdocs.config import load_config

    config = load_config(str(REPO / "mkdocs.yml"), site_dir=str(tmp_path / "site"), strict=True)
    build(config)
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").is_file()
    assert (tmp_path / "site" / "engines" / "vllm" / "index.html").is_file()
