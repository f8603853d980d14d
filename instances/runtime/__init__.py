"""The local backend's runtime: the Python environment every sandboxed instance runs (JupyterLab,
jupyter-server-proxy, numpy) and the tiny demo model that CPU-only endpoints serve (``tiny_model``), built once per
requirements file and cached outside the console's environment.

It is a virtualenv of the host's system Python (``/usr/bin/python3`` — under ``/usr``, which every sandbox binds
read-only), so its scripts' shebangs name paths that exist inside the sandbox too. The folder name carries a hash
of the requirements: changing them builds a new runtime beside the old one. A lock file lets one process build
while the others wait; ``.complete`` marks a finished build, so an interrupted one is built again.
"""

import fcntl
import hashlib
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from . import tiny_model

log = logging.getLogger(__name__)

REQUIREMENTS = Path(__file__).with_name("requirements.txt")
BUILD_TIMEOUT = 900  # seconds: a cold pip install on a slow mirror


class RuntimeUnavailable(Exception):
    """The runtime cannot be built here (no system Python with venv, pip failed)."""


def system_python() -> Path:
    """The interpreter the runtime is built from: the host's system Python when it has venv, else this one's base."""
    configured = getattr(settings, "LOCAL_RUNTIME_PYTHON", "")
    if configured:
        return Path(configured)
    candidate = Path("/usr/bin/python3")
    if candidate.exists():
        probe = subprocess.run([candidate, "-c", "import venv, ensurepip"], capture_output=True, check=False)
        if probe.returncode == 0:
            return candidate
    return Path(sys.base_prefix) / "bin" / "python3"


def python_prefix() -> Path | None:
    """The folder the runtime's Python lives in when it is not under ``/usr`` (the sandbox must bind it too)."""
    base = system_python().resolve().parent.parent
    return None if base == Path("/usr") else base


def requirements_hash() -> str:
    return hashlib.sha256(REQUIREMENTS.read_bytes() + str(system_python()).encode()).hexdigest()[:12]


def root() -> Path:
    return Path(settings.LOCAL_RUNTIME_DIR)


def path() -> Path:
    """Where the runtime for the current requirements lives (built or not)."""
    return root() / requirements_hash()


def is_ready() -> bool:
    return (path() / ".complete").exists() and tiny_model.path(path()).exists()


def _searchable(folder: Path) -> None:
    """``folder`` and every folder above it searchable by all (the sandbox users walk to the runtime through them;
    a console run with a strict umask would leave ``/opt/gpucloud`` its own)."""
    for each in (folder, *folder.parents):
        mode = each.stat().st_mode
        if mode & 0o001 == 0:
            os.chmod(each, mode | 0o001)


def ensure() -> Path:
    """The runtime's folder, building it first if needed (about a minute on a cold pip cache), with the tiny demo
    model trained into it (half a second)."""
    target = path()
    if is_ready():
        return target
    root().mkdir(parents=True, exist_ok=True)
    os.chmod(root(), 0o755)
    _searchable(root())
    with open(root() / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_ready():
            return target  # another process built it while this one waited
        if (target / ".complete").exists():
            tiny_model.install(target)  # a runtime built before the model was part of it
            return target
        shutil.rmtree(target, ignore_errors=True)
        log.info("building the local runtime in %s", target)
        steps = [
            [str(system_python()), "-m", "venv", str(target)],
            [str(target / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", "-r", str(REQUIREMENTS)],
        ]
        for step in steps:
            try:
                done = subprocess.run(step, capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise RuntimeUnavailable(f"building the runtime failed: {exc}") from exc
            if done.returncode != 0:
                raise RuntimeUnavailable(f"building the runtime failed: {(done.stderr or done.stdout)[-2000:]}")
        tiny_model.install(target)
        # Readable by the sandboxes' unprivileged users.
        subprocess.run(["chmod", "-R", "a+rX", str(target)], check=False)
        (target / ".complete").write_text(REQUIREMENTS.read_text())
    return target
