"""What a machine's shells and its JupyterLab are told, as files of the machine's own ``/etc`` (``local_etc``).

Every shell of the machine finds the same Python: the runtime's (``instances.runtime``: JupyterLab's kernels,
numpy, pip) first in PATH. The sandbox starts with it first; a login shell (JupyterLab's terminal, an SSH login, a
``bash -l`` begun from an empty environment) gets it again from ``/etc/profile.d``, so nothing that builds PATH
afresh leaves the host's ``/usr/bin/python3`` (no numpy) in front. JupyterLab's terminal is a login shell by
configuration (``/etc/jupyter``), not by the guess Jupyter makes from whether its output is a terminal.
"""

import json

PROFILE_SCRIPT = "profile.d/gpucloud-runtime.sh"
SERVER_CONFIG = "jupyter/jupyter_server_config.json"
TERMINAL_SHELL = ["/bin/bash", "-l"]


def runtime_profile(runtime_bin: str) -> str:
    """A profile script that puts ``runtime_bin`` first in PATH unless it is there already (a user's own
    ``~/.local/bin`` in front of it stays in front)."""
    return (
        "# The machine's Python (JupyterLab's kernels, numpy, pip) before the system's, in every login shell.\n"
        f'case ":${{PATH:-}}:" in *":{runtime_bin}:"*) ;; '
        f'*) PATH="{runtime_bin}:${{PATH:-/usr/local/bin:/usr/bin:/bin}}" ;; esac\n'
        "export PATH\n"
    )


def server_config() -> dict:
    """The Jupyter server's configuration: the terminal's shell."""
    return {"ServerApp": {"terminado_settings": {"shell_command": TERMINAL_SHELL}}}


def etc_files(runtime_bin: str) -> dict[str, str]:
    """The files, by their name under the machine's ``/etc``."""
    return {
        PROFILE_SCRIPT: runtime_profile(runtime_bin),
        SERVER_CONFIG: json.dumps(server_config(), indent=1) + "\n",
    }
