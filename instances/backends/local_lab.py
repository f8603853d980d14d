"""What a machine's shells and its JupyterLab are told, as files of the machine's own ``/etc`` (``local_etc``).

Every shell of the machine finds the same Python: the runtime's (``instances.runtime``: JupyterLab's kernels,
numpy, pip) first in PATH. The sandbox starts with it first; a login shell (JupyterLab's terminal, an SSH login, a
``bash -l`` begun from an empty environment) gets it again from ``/etc/profile.d``, so nothing that builds PATH
afresh leaves the host's ``/usr/bin/python3`` (no numpy) in front. JupyterLab's terminal is a login shell by
configuration (``/etc/jupyter``), not by the guess Jupyter makes from whether its output is a terminal.

JupyterLab speaks the language active where the machine is started: the console's own (Chinese) in the worker,
the requester's where a start runs in a request; the console keeps no language per user to ask instead. Its
settings' defaults (``overrides.json``, which the user may still change in the Settings menu) live in the machine's
``/etc/jupyter/lab/settings``. Its news and announcements pop-up is off (the plugin disabled in
``page_config.json``): the machine has no network to fetch news over.
"""

import json

from django.utils import translation

PROFILE_SCRIPT = "profile.d/gpucloud-runtime.sh"
SERVER_CONFIG = "jupyter/jupyter_server_config.json"
LAB_SETTINGS = "jupyter/lab/settings"  # under /etc inside: JupyterLab's application settings folder
TERMINAL_SHELL = ["/bin/bash", "-l"]
ANNOUNCEMENTS = "@jupyterlab/apputils-extension:announcements"
TRANSLATION = "@jupyterlab/translation-extension:plugin"
# The console's languages as JupyterLab's locales (the runtime has their language packs; English is built in).
LAB_LOCALES = {"zh-hans": "zh_CN", "en": "en"}


def runtime_profile(runtime_bin: str) -> str:
    """A profile script that puts ``runtime_bin`` first in PATH unless it is there already (a user's own
    ``~/.local/bin`` in front of it stays in front)."""
    return (
        "# The machine's Python (JupyterLab's kernels, numpy, pip) before the system's, in every login shell.\n"
        f'case ":${{PATH:-}}:" in *":{runtime_bin}:"*) ;; '
        f'*) PATH="{runtime_bin}:${{PATH:-/usr/local/bin:/usr/bin:/bin}}" ;; esac\n'
        "export PATH\n"
    )


def lab_locale(language: str | None = None) -> str:
    """JupyterLab's locale for a console language (the active one by default); Chinese for any Chinese."""
    language = (language or translation.get_language() or "").lower()
    return LAB_LOCALES["zh-hans"] if language.startswith("zh") else LAB_LOCALES["en"]


def server_config() -> dict:
    """The Jupyter server's configuration: the terminal's shell, and where JupyterLab's settings defaults are."""
    return {
        "ServerApp": {"terminado_settings": {"shell_command": TERMINAL_SHELL}},
        "LabApp": {"app_settings_dir": f"/etc/{LAB_SETTINGS}"},
    }


def overrides(locale: str) -> dict:
    """JupyterLab's settings defaults: its language."""
    return {TRANSLATION: {"locale": locale}}


def page_config() -> dict:
    return {"disabledExtensions": {ANNOUNCEMENTS: True}}


def etc_files(runtime_bin: str, locale: str) -> dict[str, str]:
    """The files, by their name under the machine's ``/etc``."""
    return {
        PROFILE_SCRIPT: runtime_profile(runtime_bin),
        SERVER_CONFIG: _json(server_config()),
        f"{LAB_SETTINGS}/overrides.json": _json(overrides(locale)),
        f"{LAB_SETTINGS}/page_config.json": _json(page_config()),
    }


def _json(value: dict) -> str:
    return json.dumps(value, indent=1) + "\n"
