"""The tiny demo model ``gpucloud/ngram-zh-en-tiny``, trained once when the runtime is installed.

The inference template ``tiny-demo-cpu`` serves it (``instances/workloads/tiny_lm.py``) so that an endpoint on the
local backend, which has no accelerator, answers with a real model: a character trigram model
(``instances/workloads/ngram.py``) trained on Chinese and English text already on this host, nothing downloaded.
The text is the console's own interface strings with their Chinese translations (``locale/zh_Hans/…/django.po``)
and the docstrings of some modules of Python's standard library: a few hundred thousand characters, trained in
about half a second into a JSON file of a few hundred KB inside the runtime (``models/``), which every machine
binds read-only at the same path.
"""

import ast
import os
import re
import sysconfig
import tempfile
from pathlib import Path

import polib
from django.conf import settings

from ..workloads.ngram import NgramModel

REPO = "gpucloud/ngram-zh-en-tiny"
FILE_NAME = "ngram-zh-en-tiny.json"
MODELS = "models"  # in the runtime's folder
TRANSLATIONS = Path(settings.BASE_DIR) / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"
# Standard library modules whose docstrings are English prose (not tables or code), a fixed list so that every
# host trains on about the same text.
STDLIB_MODULES = (
    "textwrap.py",
    "string.py",
    "random.py",
    "statistics.py",
    "fractions.py",
    "difflib.py",
    "calendar.py",
    "heapq.py",
    "bisect.py",
    "shlex.py",
    "csv.py",
    "argparse.py",
    "pathlib.py",
    "datetime.py",
    "functools.py",
    "collections/__init__.py",
    "json/__init__.py",
    "json/decoder.py",
    "json/encoder.py",
    "threading.py",
    "queue.py",
    "tempfile.py",
    "shutil.py",
    "subprocess.py",
    "logging/__init__.py",
    "contextlib.py",
    "dataclasses.py",
    "enum.py",
    "inspect.py",
    "zipfile.py",
)
_PLACEHOLDER = re.compile(r"%\(\w+\)[sd]|%[sd]|\{[^}]*\}|<[^>]+>")


def path(runtime_path: Path) -> Path:
    """Where the model is in a runtime's folder."""
    return runtime_path / MODELS / FILE_NAME


def translated(po_file: Path = TRANSLATIONS) -> list[tuple[str, str]]:
    """The console's interface strings with their Chinese (a plural's first form), as the catalogue holds them:
    what the model trains on and what the hub's parallel corpus publishes."""
    pairs = []
    for entry in polib.pofile(str(po_file)).translated_entries():
        chinese = entry.msgstr or entry.msgstr_plural.get(0, "")
        if entry.msgid and chinese:
            pairs.append((entry.msgid, chinese))
    return pairs


def translation_pairs(po_file: Path = TRANSLATIONS) -> list[str]:
    """Every translated interface string as one document: the English, then the Chinese, placeholders left out."""
    return [_PLACEHOLDER.sub("", f"{english}\n{chinese}") for english, chinese in translated(po_file)]


def stdlib_docstrings() -> list[str]:
    """The docstrings (modules, classes, functions) of ``STDLIB_MODULES``, each paragraph a document."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    documents = []
    for name in STDLIB_MODULES:
        try:
            tree = ast.parse((stdlib / name).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue  # a trimmed standard library: train on what there is
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                text = ast.get_docstring(node) or ""
                documents += [" ".join(p.split()) for p in text.split("\n\n") if len(p.split()) > 3]
    return documents


def train() -> NgramModel:
    return NgramModel.train(REPO, translation_pairs() + stdlib_docstrings())


def install(runtime_path: Path) -> Path:
    """Train the model into ``runtime_path`` unless it is there; readable by every machine. Returns its path."""
    target = path(runtime_path)
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(target.parent, 0o755)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".model-")
    os.close(fd)
    try:
        train().save(Path(tmp))
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target
