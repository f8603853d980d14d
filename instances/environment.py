"""What an instance boots with: its start command, its environment variables and its owner's secrets.

A launch checks them once (:func:`check_boot_options`: the wizard, the API and the one-click clone alike) and the
instance keeps them. At every boot its backend asks :func:`boot_environment` for the variables plus the current
values of the secrets it names, and runs the start command with ``/bin/sh -c`` (none: the image's default).
"""

import logging
from dataclasses import dataclass, field

from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.debug import sensitive_variables

from core.field_errors import FieldError

from .choices import Reason
from .environment_variables import check_name, check_value, utf8_length
from .models import Instance, InstanceEvent, Secret
from .secrets import secret_values

logger = logging.getLogger(__name__)

MAX_START_COMMAND_BYTES = 4096
MAX_VARIABLES = 64
MAX_SECRETS = 64


@dataclass(frozen=True)
class BootOptions:
    """A launch's checked start command, variables and secret names."""

    start_command: str = ""
    env: dict[str, str] = field(default_factory=dict)
    secret_names: tuple[str, ...] = ()


def check_start_command(command) -> str:
    """The command as it will run (Windows line ends made Unix ones: a shell reads a carriage return as part of the
    command), or "" for none; FieldError on ``start_command`` for what a shell cannot be given."""
    if command is None:
        return ""
    if not isinstance(command, str) or utf8_length(command) is None:
        raise FieldError("start_command", _("The start command must be text."), code="invalid_start_command")
    command = command.replace("\r\n", "\n")
    if "\x00" in command:
        raise FieldError(
            "start_command", _("The start command cannot contain a NUL character."), code="invalid_start_command"
        )
    if utf8_length(command) > MAX_START_COMMAND_BYTES:
        raise FieldError(
            "start_command",
            _("The start command is too long: at most %(max)d bytes.") % {"max": MAX_START_COMMAND_BYTES},
            code="invalid_start_command",
        )
    return command if command.strip() else ""


def check_env(env) -> dict[str, str]:
    """The variables, each name and value checked; FieldError on ``env`` naming the first one refused."""
    if env is None:
        return {}
    if not isinstance(env, dict):
        raise FieldError("env", _("Give the environment variables as names with text values."), code="invalid_env")
    if len(env) > MAX_VARIABLES:
        raise FieldError(
            "env", _("At most %(max)d environment variables.") % {"max": MAX_VARIABLES}, code="too_many_variables"
        )
    return {check_name(name, field="env"): check_value(name, value, field="env") for name, value in env.items()}


def check_secret_names(owner, names) -> tuple[str, ...]:
    """The names, once each, of secrets the owner has; FieldError on ``secrets`` otherwise."""
    if names is None:
        return ()
    if isinstance(names, str) or not isinstance(names, list | tuple):
        raise FieldError("secrets", _("Give the secrets as a list of their names."), code="invalid_secrets")
    unique = tuple(dict.fromkeys(check_name(name, field="secrets") for name in names))
    if len(unique) > MAX_SECRETS:
        raise FieldError("secrets", _("At most %(max)d secrets.") % {"max": MAX_SECRETS}, code="too_many_secrets")
    known = set(Secret.objects.for_user(owner).filter(name__in=unique).values_list("name", flat=True))
    unknown = [name for name in unique if name not in known]
    if unknown:
        raise FieldError(
            "secrets",
            _("You have no secret named %(names)s.") % {"names": ", ".join(unknown)},
            code="unknown_secret",
            status=404,  # names a secret that is not there
        )
    return unique


def check_boot_options(owner, *, start_command="", env=None, secret_names=()) -> BootOptions:
    """What a launch boots with, checked; FieldError naming the field (``start_command``, ``env``, ``secrets``)."""
    command = check_start_command(start_command)
    variables = check_env(env)
    names = check_secret_names(owner, secret_names)
    both = [name for name in names if name in variables]
    if both:
        raise FieldError(
            "env",
            _("%(name)s is both a variable and a secret: give it once.") % {"name": both[0]},
            code="duplicate_variable",
        )
    return BootOptions(start_command=command, env=variables, secret_names=names)


def parse_env_lines(text: str) -> dict[str, str]:
    """The wizard's ``NAME=value`` lines as variables. Blank lines and ``#`` comments are skipped; the value is
    everything after the first ``=``, taken literally (quotes included). FieldError on ``env`` naming the line."""
    variables: dict[str, str] = {}
    for number, line in enumerate((text or "").replace("\r\n", "\n").split("\n"), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if "=" not in line:
            raise FieldError("env", _("Line %(n)d: write NAME=value.") % {"n": number}, code="invalid_env")
        name, value = line.split("=", 1)
        name = name.strip()
        if name in variables:
            raise FieldError(
                "env", _("Line %(n)d: %(name)s is given twice.") % {"n": number, "name": name}, code="invalid_env"
            )
        variables[name] = value
    return variables


@sensitive_variables("values")
def boot_environment(instance: Instance) -> dict[str, str]:
    """The environment the instance's workload gets at this boot, besides what the platform sets itself: its
    variables and the current values of the secrets it names. A secret deleted since the launch is left out, and
    the instance's timeline and the console's log say which (by name: a value is never written anywhere)."""
    names = list(instance.secret_names or [])
    values = secret_values(instance.owner_id, names)
    missing = [name for name in names if name not in values]
    if missing:
        _note_missing(instance, missing)
    return {str(name): str(value) for name, value in (instance.env or {}).items()} | values


def _note_missing(instance: Instance, missing: list[str]) -> None:
    detail = ", ".join(missing)[:255]
    logger.warning("instance %s boots without its deleted secrets %s", instance.public_id, detail)
    last = instance.events.order_by("-at", "-id").first()
    if last is not None and last.reason == Reason.SECRET_MISSING and last.detail == detail:
        return  # a retried submission of the same boot: said once
    InstanceEvent.objects.create(
        instance=instance,
        old=instance.status,
        new=instance.status,
        reason=Reason.SECRET_MISSING,
        detail=detail,
        at=timezone.now(),
    )
