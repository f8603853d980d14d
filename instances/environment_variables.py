"""The one rule for the environment variables users give their instances: plain variables at launch and the names
of their secrets alike.

A name is one a POSIX shell accepts (``[A-Za-z_][A-Za-z0-9_]*``) and none the platform sets at every boot: those
would be overwritten, or would point the workload at another tenant's cards or break the machine's agent. A value
is text of bounded size without a NUL character (the kernel's environment cannot hold one)."""

import re

from django.utils.translation import gettext as _

from core.field_errors import FieldError

NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_NAME_LENGTH = 64
MAX_VALUE_BYTES = 4096

# Set by the platform (the sandbox, the Slurm agent, the login shell) for every machine.
RESERVED_NAMES = frozenset(
    {
        "HOME",
        "PATH",
        "PWD",
        "OLDPWD",
        "SHELL",
        "USER",
        "LOGNAME",
        "HOSTNAME",
        # Which cards the workload sees: the platform sets them to the instance's own cards.
        "CUDA_VISIBLE_DEVICES",
        "ASCEND_RT_VISIBLE_DEVICES",
        "ASCEND_VISIBLE_DEVICES",
        "MLU_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "GPU_DEVICE_ORDINAL",
    }
)
RESERVED_PREFIXES = ("GPUCLOUD_", "JUPYTER_", "SLURM_")


def utf8_length(text: str) -> int | None:
    """The length of ``text`` in UTF-8 bytes, or None when it holds a lone surrogate (JSON can carry one, UTF-8
    cannot: such text can reach neither the database nor a process's environment)."""
    try:
        return len(text.encode())
    except UnicodeEncodeError:
        return None


def check_name(name, *, field: str) -> str:
    """``name`` if it may be set by a user; else FieldError on ``field`` saying why."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        # Quoted back as UTF-8 can carry it: a lone surrogate from JSON would break the response.
        shown = (name if isinstance(name, str) else repr(name))[:80].encode("utf-8", "replace").decode()
        raise FieldError(
            field,
            _("“%(name)s” is not a valid variable name: use letters, digits and underscores, not a digit first.")
            % {"name": shown},
            code="invalid_variable_name",
        )
    if len(name) > MAX_NAME_LENGTH:
        raise FieldError(
            field,
            _("Variable names are at most %(max)d characters.") % {"max": MAX_NAME_LENGTH},
            code="invalid_variable_name",
        )
    if name in RESERVED_NAMES or name.startswith(RESERVED_PREFIXES):
        raise FieldError(
            field,
            _("%(name)s is set by the platform and cannot be given.") % {"name": name},
            code="reserved_variable_name",
        )
    return name


def check_value(name: str, value, *, field: str, max_bytes: int = MAX_VALUE_BYTES) -> str:
    """``value`` if it may be the value of ``name``; else FieldError on ``field``. The message names the variable,
    never quotes the value (it may be a secret)."""
    if not isinstance(value, str) or utf8_length(value) is None:
        raise FieldError(field, _("The value of %(name)s must be text.") % {"name": name}, code="invalid_variable")
    if "\x00" in value:
        raise FieldError(
            field, _("The value of %(name)s cannot contain a NUL character.") % {"name": name}, code="invalid_variable"
        )
    if utf8_length(value) > max_bytes:
        raise FieldError(
            field,
            _("The value of %(name)s is too long: at most %(max)d bytes.") % {"name": name, "max": max_bytes},
            code="invalid_variable",
        )
    return value
