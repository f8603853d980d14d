"""The newest ``huggingface_hub`` release (with its default ``hf_xet`` and the ``hf`` command line), installed in an
environment of its own beside the pinned one, so that the hub is tried with what a user installs today as well as
with the line the project pins.

The environment lives under the test data folder and is upgraded once per test session; where the package index
cannot be reached the tests that need it skip and say so (in CI that skip fails, as for any service).
"""

import os
import subprocess
import venv
from pathlib import Path

import pytest
from django.conf import settings

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


@pytest.fixture(scope="session")
def latest_hf() -> Path:
    """The ``bin`` folder of an environment with the newest ``huggingface_hub``: its ``python`` and ``hf``."""
    home = Path(settings.DATA_DIR) / "hf-latest"
    python = home / "bin" / "python"
    if not python.exists():
        venv.EnvBuilder(with_pip=True, clear=True).create(home)
    install = [str(python), "-m", "pip", "install", "--quiet", "--upgrade", "huggingface_hub"]
    done = subprocess.run(install, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        message = f"the newest huggingface_hub could not be installed: {done.stderr.strip()[-300:]}"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return home / "bin"


def run_latest(bin_folder: Path, endpoint: str, home: Path, *argv: str, env: dict | None = None):
    """Run a program of the newest client's environment against ``endpoint``, with its own ``HF_HOME``."""
    environment = {
        "PATH": f"{bin_folder}:/usr/bin:/bin",
        "HOME": str(home),
        "HF_HOME": str(home / "hf"),
        "HF_ENDPOINT": endpoint,
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "NO_COLOR": "1",
        "LANG": "C.UTF-8",
        **(env or {}),
    }
    program = argv[0] if "/" in argv[0] else str(bin_folder / argv[0])
    return subprocess.run(
        [program, *argv[1:]], capture_output=True, text=True, env=environment, timeout=300, check=False
    )
