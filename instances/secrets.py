"""Users' secrets: saved encrypted, listed by name, replaced and deleted by their owner, and read back in plaintext
only to boot an instance (:func:`secret_values`, for ``instances.environment``). Nothing here hands a value to a
page, the API, a log or an event; Django's error reports (the debug page, error e-mails), which list a failing
function's variables, show the values here as stars."""

import logging

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.debug import sensitive_variables

from core.encryption import DecryptionError, decrypt, encrypt
from core.errors import Conflict, NotFound, ServiceError
from core.field_errors import FieldError

from .environment_variables import check_name, check_value
from .models import Secret

logger = logging.getLogger(__name__)

MAX_SECRETS_PER_USER = 100
# Larger than a plain variable's 4 KB: an SSH private key or a cloud credentials file fits.
MAX_SECRET_BYTES = 32 * 1024


@sensitive_variables("value")
def _checked(name, value) -> tuple[str, str]:
    name = check_name(name, field="name")
    if value == "" or value is None:
        raise FieldError("value", _("Give the secret a value."), code="value_required")
    return name, check_value(name, value, field="value", max_bytes=MAX_SECRET_BYTES)


def get_secret(owner, name) -> Secret:
    """The owner's secret called ``name``; anyone else's and a missing one are the same 404."""
    secret = Secret.objects.for_user(owner).filter(name=name).first() if isinstance(name, str) else None
    if secret is None:
        raise NotFound(_("No such secret."))
    return secret


@sensitive_variables("value")
def create_secret(owner, name, value) -> Secret:
    """A new secret; a name the owner already uses is refused (replace its value instead)."""
    name, value = _checked(name, value)
    if Secret.objects.for_user(owner).filter(name=name).exists():
        raise _exists(name)
    return _create(owner, name, value)


@sensitive_variables("value", "ciphertext")
def put_secret(owner, name, value) -> tuple[Secret, bool]:
    """Set the secret ``name`` to ``value``, creating it if need be; returns (secret, created). Instances that name
    it get the new value at their next boot."""
    name, value = _checked(name, value)
    ciphertext = encrypt(value)
    # update() bypasses auto_now: the time is set here.
    changed = (
        Secret.objects.for_user(owner).filter(name=name).update(value_encrypted=ciphertext, updated_at=timezone.now())
    )
    if changed:
        return get_secret(owner, name), False
    return _create(owner, name, value), True


@sensitive_variables("value")
def _create(owner, name: str, value: str) -> Secret:
    if Secret.objects.for_user(owner).count() >= MAX_SECRETS_PER_USER:
        raise ServiceError(
            _("You can keep at most %(n)d secrets; delete one first.") % {"n": MAX_SECRETS_PER_USER},
            code="too_many_secrets",
        )
    try:
        with transaction.atomic():
            return Secret.objects.create(owner=owner, name=name, value_encrypted=encrypt(value))
    except IntegrityError as exc:  # the same name saved at the same moment by another request
        raise _exists(name) from exc


def _exists(name: str) -> Conflict:
    return Conflict(
        _("You already have a secret named %(name)s: replace its value instead.") % {"name": name},
        code="secret_exists",
    )


def delete_secret(owner, name) -> None:
    """Delete the secret. Instances that name it boot without it from now on, and their timeline says so."""
    get_secret(owner, name).delete()


@sensitive_variables("values")
def secret_values(owner_id, names) -> dict[str, str]:
    """name → plaintext of the owner's secrets among ``names``; a missing one (or one that cannot be decrypted,
    after a SECRET_KEY change without a fallback) is left out. For booting instances only."""
    if not names:
        return {}
    values = {}
    for secret in Secret.objects.filter(owner_id=owner_id, name__in=list(names)):
        try:
            values[secret.name] = decrypt(secret.value_encrypted)
        except DecryptionError:
            logger.error("secret %s of user %s cannot be decrypted (SECRET_KEY changed?)", secret.name, owner_id)
    return values
