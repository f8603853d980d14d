"""Names and paths in a user's cloud storage: what is allowed, and the one normal form the database keeps.

A path is always relative to the user's own root and written ``/a/b/c``; ``/`` is the root itself. The rules are
strict because the same tree is later mounted into instances at ``/root/shared``: a name must be something every
Linux file system and shell handles, so ``..``, separators, control characters and overlong names are refused with
a message rather than silently changed. The only change made is Unicode NFC normalisation, so that a name typed on
macOS (decomposed) and the same name typed on Windows are one name.
"""

import unicodedata

from django.utils.translation import gettext as _

from core.errors import ServiceError

ROOT = "/"
MAX_NAME_BYTES = 255  # NAME_MAX on Linux file systems
MAX_PATH_BYTES = 2048  # stays well inside PostgreSQL's b-tree row limit for the (owner, path) index
MAX_DEPTH = 32
# The names of these rules' formats in the API's schema: a name (``clean_name``) and a path (``clean_path``).
NAME_FORMAT = "storage-name"
PATH_FORMAT = "storage-path"
NAME_RULES = (
    "A file or folder name: not empty, “.” or “..”; no “/”, “\\”, control or invisible format characters; no space "
    "at either end; at most 255 bytes in UTF-8."
)
PATH_RULES = (
    f"/a/b/c: names as below, at most {MAX_DEPTH} deep and {MAX_PATH_BYTES} bytes; / (or empty) is the root, and a "
    f"path without its leading / is taken from the root (a/b is /a/b). {NAME_RULES}"
)


class InvalidPath(ServiceError):
    code = "invalid_path"


def _forbidden_character(name: str) -> str | None:
    for char in name:
        # Cc: control characters (NUL, newline, DEL…); Cf: invisible format characters such as the right-to-left
        # override, which can make "exe.txt" display as "txt.exe".
        if unicodedata.category(char) in {"Cc", "Cf"}:
            return char
    return None


def clean_name(name) -> str:
    """One file or folder name, validated and NFC-normalised; raises ``InvalidPath`` with a clear message."""
    if not isinstance(name, str) or name == "":
        raise InvalidPath(_("The name is empty."))
    name = unicodedata.normalize("NFC", name)
    if name in {".", ".."}:
        raise InvalidPath(_("“.” and “..” cannot be used as names."))
    if "/" in name or "\\" in name:
        raise InvalidPath(_("A name cannot contain “/” or “\\”; create folders to organise files."))
    if (char := _forbidden_character(name)) is not None:
        raise InvalidPath(_("A name cannot contain control characters (found U+%(code)04X).") % {"code": ord(char)})
    if name != name.strip():
        raise InvalidPath(_("A name cannot start or end with a space."))
    if len(name.encode()) > MAX_NAME_BYTES:
        raise InvalidPath(
            _("The name is too long: at most %(n)d bytes (about 85 Chinese characters).") % {"n": MAX_NAME_BYTES}
        )
    return name


def clean_path(path) -> str:
    """A path in normal form ``/a/b``; ``""`` and ``"/"`` are the root. Refuses ``..``, ``//`` and ``\\``."""
    if path is None or path in {"", ROOT}:
        return ROOT
    if not isinstance(path, str):
        raise InvalidPath(_("The path must be text."))
    if "\\" in path:
        raise InvalidPath(_("Use “/” to separate folders, not “\\”."))
    parts = path.strip("/").split("/") if path.startswith("/") else path.rstrip("/").split("/")
    if len(parts) > MAX_DEPTH:
        raise InvalidPath(_("Folders can be nested at most %(n)d deep.") % {"n": MAX_DEPTH})
    if any(part == "" for part in parts):
        raise InvalidPath(_("The path contains an empty folder name (“//”)."))
    normal = ROOT + "/".join(clean_name(part) for part in parts)
    check_length(normal)
    return normal


def check_length(path: str) -> None:
    if len(path.encode()) > MAX_PATH_BYTES:
        raise InvalidPath(_("The full path is too long: at most %(n)d bytes.") % {"n": MAX_PATH_BYTES})


def join(folder_path: str, name: str) -> str:
    path = (folder_path.rstrip("/") + "/" + name) if folder_path != ROOT else ROOT + name
    check_length(path)
    return path


def split(path: str) -> tuple[str, str]:
    """``/a/b/c`` → (``/a/b``, ``c``); the root has no parent."""
    head, _sep, name = path.rpartition("/")
    return (head or ROOT), name


def ancestors(path: str) -> list[str]:
    """The folders above ``path`` and ``path`` itself, root excluded: ``/a/b`` → [``/a``, ``/a/b``]."""
    if path == ROOT:
        return []
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def numbered(name: str, n: int) -> str:
    """``report.pdf`` → ``report (1).pdf``; ``data.tar.gz`` → ``data (1).tar.gz``; ``.env`` → ``.env (1)``."""
    stem, dot, ext = name.rpartition(".")
    if not stem:  # no extension, or a dot file
        return f"{name} ({n})"
    if stem.endswith(".tar"):
        stem, ext = stem[:-4], "tar." + ext
    return f"{stem} ({n}){dot}{ext}"
