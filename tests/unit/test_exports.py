"""Each package's __all__ lists exactly its public (non-underscore) names, as httpx checks."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = ["harness", "harness.engines", "harness.simulator", "workloads", "canaries", "passport.audit",
            "passport.model", "passport.judge", "passport.plan", "passport.report", "passport.run",
            "passport.cli"]


LAZY = ["harness", "passport", "passport.judge", "passport.model",
        "passport.report"]  # names loaded on first use (PEP 562)


@pytest.mark.parametrize("package", [p for p in PACKAGES if p not in LAZY])
def test_all_matches_public_names(package: str) -> None:
    module = importlib.import_module(package)
    public = {n for n, v in vars(module).items() if not n.startswith("_") and not isinstance(v, type(importlib))}
    assert set(module.__all__) == public - {"annotations"}


@pytest.mark.parametrize("package", LAZY)
def test_lazy_packages_export_exactly_their_names(package: str) -> None:
    """`passport`, `passport.judge`, `passport.model` and `passport.report` load their names on
    first use (so `import passport.audit`, `passport capacity` and `show`'s headline stay light):
    each one listed resolves, and nothing else is offered."""
    module = importlib.import_module(package)
    assert set(module.__all__) == set(module._HOME)
    for name in module.__all__:
        assert getattr(module, name) is not None
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018


def test_the_writer_and_the_auditor_agree_on_what_success_is() -> None:
    """harness writes outcome classes into requests.parquet; passport.audit reads them without
    importing harness, so each keeps its own constant and this keeps them in step."""
    import harness
    from passport import audit

    assert harness.SUCCESS_OUTCOMES == audit.SUCCESS_OUTCOMES
    assert set(harness.SUCCESS_OUTCOMES) < set(harness.OUTCOMES)


def test_every_package_s_errors_derive_from_the_one_root() -> None:
    """The CLI (and a library user) catches one class: each package's error root is a PassportError."""
    import canaries
    import harness
    import workloads
    from passport import PassportError

    for error in (harness.HarnessError, harness.EndpointError, harness.EngineLaunchError, harness.ScheduleError,
                  workloads.WorkloadError, workloads.TokenizerError, canaries.CanaryError,
                  canaries.SandboxUnavailable):
        assert issubclass(error, PassportError), error


def test_a_spec_validates_without_loading_the_runner() -> None:
    """passport.model's spec needs the load, limits and timeouts specs only (harness._loadspec)."""
    import subprocess
    import sys

    code = ("import sys\nfrom passport.model import parse_spec\n"
            "parse_spec({'endpoint': {'base_url': 'http://127.0.0.1:1/v1'}, 'load': {'pattern': 'closed', "
            "'concurrency': 1}})\n"
            "print(' '.join(m for m in ('harness._runner', 'harness._http', 'harness._control', 'harness.simulator') "
            "if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert loaded == []
