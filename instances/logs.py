"""An instance's logs: the tail of what its start command wrote (stdout and stderr together), as lines a page and
a terminal show alike, for the instance page's panel, the API and ``gpucloud logs``."""

import logging
import re
from dataclasses import dataclass

from django.utils.translation import gettext as _

from core.errors import Unavailable
from core.field_errors import FieldError

from .backends import BackendError, get_backend
from .models import Instance

logger = logging.getLogger(__name__)

DEFAULT_TAIL = 200
MAX_TAIL = 5000
# Colour and cursor sequences (CSI) and window titles (OSC): a terminal draws them, a page would print them.
ESCAPE_SEQUENCES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")


@dataclass(frozen=True)
class LogTail:
    lines: list[str]
    simulated: bool  # the simulated backend runs no machine, so there is nothing to read


def check_tail(tail) -> int:
    if isinstance(tail, bool) or not isinstance(tail, int) or not 1 <= tail <= MAX_TAIL:
        raise FieldError(
            "tail", _("Give tail as a whole number of lines from 1 to %(max)d.") % {"max": MAX_TAIL}, code="invalid"
        )
    return tail


def read_logs(instance: Instance, *, tail: int = DEFAULT_TAIL) -> LogTail:
    """The last ``tail`` lines (1 to MAX_TAIL). Unavailable (503) when the backend cannot be read right now."""
    tail = check_tail(tail)
    backend = get_backend(instance.backend_name)
    if backend.simulated:
        return LogTail(lines=[], simulated=True)
    try:
        text = backend.logs(instance, tail=tail)
    except BackendError as exc:
        logger.warning("reading the logs of %s: %s", instance.public_id, exc)
        raise Unavailable(_("The logs cannot be read right now; try again shortly."), code="logs_unavailable") from exc
    return LogTail(lines=as_lines(text, tail), simulated=False)


def as_lines(text: str, tail: int) -> list[str]:
    """The last ``tail`` lines of ``text`` as a terminal leaves them: escape sequences dropped, and of a line that
    a progress bar redrew with carriage returns, what was drawn last."""
    if not text:
        return []
    lines = text.split("\n")  # not splitlines(): it would also break at form feeds and other separators
    if lines[-1] == "":
        lines.pop()
    return [_as_shown(line) for line in lines[-tail:]]


def _as_shown(line: str) -> str:
    line = ESCAPE_SEQUENCES.sub("", line).rstrip("\r")
    return line.rsplit("\r", 1)[-1]
