"""The CLI as a user meets it: whole outputs and exit codes."""

from __future__ import annotations

import json
from importlib import metadata

import pytest

from tests.conftest import SimFactory, run_cli


def test_version() -> None:
    result = run_cli("--version")
    assert (result.returncode, result.stdout, result.stderr) == (0, f"passport {metadata.version('passport')}\n", "")


def test_help_lists_commands_and_exit_codes() -> None:
    result = run_cli("--help")
    assert result.returncode == 0 and result.stderr == ""
    for text in ("run", "verify", "exit codes:", "2  usage or input error", "--api-key-env"):
        assert text in result.stdout


def test_run_help_names_every_option() -> None:
    result = run_cli("run", "--help")
    assert result.returncode == 0
    for option in ("--endpoint URL", "--api-key-env NAME", "--out DIR", "--quiet"):
        assert option in result.stdout


def test_no_command_prints_help_and_exits_2() -> None:
    result = run_cli()
    assert result.returncode == 2 and result.stdout.startswith("usage: passport")


def test_missing_spec_file_is_an_input_error() -> None:
    result = run_cli("run", "does-not-exist.yaml")
    assert result.returncode == 2
    assert result.stderr == "ERROR: cannot read spec does-not-exist.yaml: No such file or directory\n"


def test_verify_of_a_folder_without_a_passport_is_an_input_error(tmp_path: object) -> None:
    """An unreadable run folder is a usage error (exit 2), not a failed verification (issue 11)."""
    result = run_cli("verify", str(tmp_path))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"ERROR: cannot read {tmp_path}/passport.json: No such file or directory; give a run " \
                            "folder (results/<run>/)\n"


@pytest.mark.slow
def test_probe_prints_every_standard_field_with_its_source(simulator: SimFactory) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1")
    table = run_cli("probe", url)
    assert table.returncode == 0, table.stderr
    rows = {line.split()[0]: line for line in table.stdout.splitlines()}
    assert "passport-simulator" in rows["engine.name"] and "probed (/v1/models owned_by)" in rows["engine.name"]
    assert rows["model.quantization"].rstrip().endswith("declare it under identity:)")
    as_json = json.loads(run_cli("probe", url, "--json").stdout)
    assert as_json["model.id"] == {"value": "sim-model", "source": "probed", "via": "/v1/models"}
    assert as_json["host.logical_cores"]["source"] == "client"


def test_commands_that_need_no_load_generator_do_not_load_it() -> None:
    """`--help`, `capacity` from numbers and `workload --presets` start without harness, pyarrow,
    pydantic or matplotlib (what made every command take 2 s to start); `show`'s headline, `gate`
    and `compare` read passports and raw tables without the load generator, its HTTP stack or
    matplotlib (plain `show` loaded all three and took twice as long as `show --as vllm`)."""
    import subprocess
    import sys

    from tests.conftest import REPO

    heavy = {"harness", "workloads", "httpx", "rich", "pyarrow", "pydantic", "matplotlib", "pandas", "numpy"}
    readers = {"pyarrow", "pydantic", "numpy", "pandas"}
    base, same = str(REPO / "tests/data/runs/base"), str(REPO / "tests/data/runs/same")
    for argv, allowed in ((["--help"], set()), (["run", "--help"], set()),
                          (["capacity", "--kv-pool-gib", "23.3", "--kv-kib-per-token", "64", "--context", "32768"],
                           set()),
                          (["workload", "--presets"], {"workloads", "pyarrow", "pydantic", "numpy"}),
                          (["show", base, "--allow-unsigned"], readers),
                          (["gate", base, "--require", "verdict == VALID", "--allow-unsigned"], readers),
                          (["compare", base, same, "--allow-unsigned"], readers)):
        result = subprocess.run([sys.executable, "-X", "importtime", "-m", "passport.cli", *argv], cwd=REPO,
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-500:]
        loaded = {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines() if line.startswith("import")}
        assert not (heavy - allowed) & loaded, (argv, sorted((heavy - allowed) & loaded))


def test_an_unknown_option_shows_its_commands_usage_and_the_closest_options() -> None:
    result = run_cli("run", "--endpoint", "http://127.0.0.1:1/v1", "--input_len", "8")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("usage: passport run "), result.stderr  # run's usage, not the top level's
    assert "passport run: error: unrecognized arguments: --input_len (did you mean --input-len or " in result.stderr
    far = run_cli("verify", "some/run", "--colour")
    assert far.returncode == 2 and far.stderr.startswith("usage: passport verify ")
    assert far.stderr.rstrip().endswith("unrecognized arguments: --colour (see passport verify --help)")


def test_the_command_ends_by_os_exit_after_the_interpreters_own_exit_steps() -> None:
    """`console` skips the native teardown that aborts a finished command now and then (exit -6),
    so it must do the rest of what the interpreter does at exit: wait for a thread that is not a
    daemon, run atexit handlers, deliver every byte written to a pipe, and keep the exit code; and
    end the idle threads of a pool no one shut down (a second Ctrl-C skips the writers' close: a
    join without concurrent.futures' exit hook waited on such a thread for ever)."""
    import subprocess
    import sys

    script = (
        "import atexit, sys, threading, time\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from passport.cli import _main\n"
        "pools = []  # held, as the writers a second Ctrl-C skipped are held by its traceback\n"
        "def fake():\n"
        "    atexit.register(lambda: print('atexit ran'))\n"
        "    pools.append(ThreadPoolExecutor(1))\n"
        "    pools[0].submit(lambda: None).result()  # its thread left idle, never shut down\n"
        "    threading.Thread(target=lambda: (time.sleep(0.3), print('thread done'))).start()\n"
        "    sys.stdout.write('x' * 300000 + '\\n')\n"
        "    return 3\n"
        "_main.main = fake\n"
        "_main.console()\n"
        "print('never')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    lines = done.stdout.splitlines()
    assert (done.returncode, lines, done.stderr) == (3, ["x" * 300000, "thread done", "atexit ran"], "")


def test_the_installed_command_is_the_console_entry_point() -> None:
    points = metadata.entry_points(group="console_scripts")
    assert [p.value for p in points if p.name == "passport"] == ["passport.cli:console"]
