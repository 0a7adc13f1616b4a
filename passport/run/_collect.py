"""Who and what was measured: one `collect_*` function per source.

Each returns {field: SourcedValue}; what a source cannot tell is left out (and shows as
unknown), never guessed. Sources: the endpoint (`probed`, with the URL path as `via`; see
`_identity.py`), the launcher (`launcher`), the spec (`declared`), and this machine
(`client`: CPU, memory, OS, kernel, GPU through NVML where present). Secrets are never
read here: launch commands are recorded with key/token values redacted.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import psutil

from harness import EngineLauncher, nvml_devices
from passport.audit import RULES_KEY, RULES_VERSION, sha256_file
from passport.model import EngineSpec, HarnessInfo, SourcedValue
from passport.report import LAYOUT_KEY, REPORT_LAYOUT

__all__ = ["collect_launcher", "collect_host", "collect_harness", "library_versions"]

_REPO_ROOT = Path(__file__).resolve().parent.parent


def collect_launcher(
    launcher: EngineLauncher, model_path: str | None, model_sha256: str | None
) -> dict[str, SourcedValue]:
    """The command the harness ran (redacted), its program's hash, and the model file's (or the
    model folder's: see `_folder_sha256`); `model_sha256` when the caller hashed it already."""
    fields = {"engine.command": SourcedValue(value=" ".join(launcher.command), source="launcher")}
    binary = EngineSpec.program_of(launcher.argv)
    resolved = binary if os.path.isabs(binary) else None
    if resolved is None:
        resolved = shutil.which(binary, path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if resolved and os.path.isfile(resolved):
        real = os.path.realpath(resolved)
        fields["engine.binary"] = SourcedValue(value=real, source="launcher")
        fields["engine.binary_sha256"] = SourcedValue(value=sha256_file(Path(real)), source="launcher")
    if model_path:
        fields["model.file"] = SourcedValue(value=os.path.basename(model_path), source="launcher")
        if model_sha256 is None and os.path.isfile(model_path):
            model_sha256 = sha256_file(Path(model_path))
        elif model_sha256 is None and os.path.isdir(model_path):
            model_sha256 = _folder_sha256(Path(model_path))
        if model_sha256:
            fields["model.file_sha256"] = SourcedValue(value=model_sha256, source="launcher")
    return fields


def _folder_sha256(folder: Path) -> str:
    """A model folder (Hugging Face layout) as one hash: each regular file's relative path and
    sha256, in sorted order; hidden files are left out. A renamed or edited file changes it."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not any(
            part.startswith(".") for part in p.relative_to(folder).parts)):
        digest.update(f"{path.relative_to(folder).as_posix()}\0{sha256_file(path)}\n".encode())
    return digest.hexdigest()


def collect_host() -> dict[str, SourcedValue]:
    """The client machine: CPU, cores, memory, OS, kernel, and its GPUs, driver and CUDA through NVML."""
    cpu = platform.processor() or None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    values = {
        "host.cpu": cpu,
        "host.logical_cores": os.cpu_count(),
        "host.memory_bytes": psutil.virtual_memory().total,
        "host.os": platform.platform(),
        "host.kernel": platform.release(),
    }
    out = {k: SourcedValue(value=v, source="client") for k, v in values.items() if v is not None}
    gpus = nvml_devices()
    if gpus:
        out["host.gpu"] = SourcedValue(value=[g["name"] for g in gpus], source="client", via="NVML")
        out["host.gpu_memory_bytes"] = SourcedValue(value=[g["memory_total_bytes"] for g in gpus], source="client",
                                                    via="NVML")
        out["host.gpu_driver"] = SourcedValue(value=gpus[0]["driver"], source="client", via="NVML")
        out["host.cuda_driver"] = SourcedValue(value=gpus[0]["cuda"], source="client", via="NVML")
    else:
        out["host.gpu"] = SourcedValue(value=None, source="unknown", via="NVML found no NVIDIA driver on this machine")
    return out


def _git(*args: str) -> str | None:
    try:
        result = subprocess.run(["git", "-C", str(_REPO_ROOT), *args], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


_LIBRARIES = ("numpy", "pyarrow", "httptools", "uvloop", "msgspec", "orjson", "pydantic", "httpx", "transformers",
              "tokenizers", "jsonschema", "prometheus_client", "matplotlib")


def library_versions() -> dict[str, str]:
    """Versions of the libraries that compute or time something, for the protocol."""
    out = {}
    for name in _LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    out[LAYOUT_KEY] = str(REPORT_LAYOUT)  # what verify needs to re-render this run's reports
    out[RULES_KEY] = str(RULES_VERSION)  # and to re-derive the rules' messages as this run wrote them
    return out


def collect_harness(raw_schema_version: int) -> HarnessInfo:
    """This harness: version, git revision and whether the tree is dirty, Python, platform."""
    try:
        version = metadata.version("passport")
    except metadata.PackageNotFoundError:
        version = "unknown"
    revision = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no") if revision else None
    try:
        import uvloop  # noqa: F401

        has_uvloop = True
    except ImportError:
        has_uvloop = False
    return HarnessInfo(
        version=version,
        git_revision=revision,
        git_dirty=None if status is None else bool(status),
        python=sys.version.split()[0],
        platform=platform.platform(),
        uvloop=has_uvloop,
        raw_schema_version=raw_schema_version,
        libraries=library_versions(),
    )
