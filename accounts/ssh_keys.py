"""SSH public keys: checked with asyncssh, stored as one OpenSSH line with their SHA-256 fingerprint, at most
``MAX_SSH_KEYS_PER_USER`` per user. The SSH gateway (``instances.ssh_gateway``) lets a key in to its owner's
running instances.
"""

from dataclasses import dataclass

import asyncssh
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from core.errors import Conflict, NotFound, ServiceError
from core.field_errors import FieldError
from core.validators import clean_display_name

from .models import SSHKey, User

MAX_SSH_KEYS_PER_USER = 20
MAX_NAME_LENGTH = 100  # SSHKey.name
MIN_RSA_BITS = 2048
# Far more than any public key (a 16,384-bit RSA key is about 2,800 characters); a bound on what is parsed.
MAX_KEY_TEXT = 16_000
# The API's schema names the format of a key's text (``SSHKeySerializer``).
KEY_FORMAT = "ssh-public-key"
ACCEPTED_TYPES = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "ssh-rsa")
PRIVATE_KEY_MARKERS = ("PRIVATE KEY", "PuTTY-User-Key-File")


@dataclass(frozen=True)
class ParsedKey:
    key_type: str
    fingerprint: str
    openssh: str  # "type base64 comment", one line
    comment: str


def parse_public_key(text) -> ParsedKey:
    """The key in ``text`` (OpenSSH or RFC 4716 format), or ``ServiceError`` saying what is wrong with it."""
    text = text.strip() if isinstance(text, str) else ""
    if not text:
        raise FieldError("public_key", _("Paste a public key (the contents of a .pub file)."), code="key_required")
    if any(marker in text for marker in PRIVATE_KEY_MARKERS):
        raise FieldError(
            "public_key",
            _(
                "This is a PRIVATE key. Never share it with anyone, us included: paste the public key instead "
                "(the .pub file, e.g. ~/.ssh/id_ed25519.pub), and if this private key was shared anywhere, "
                "replace it."
            ),
            code="private_key",
        )
    if len(text) > MAX_KEY_TEXT:
        raise FieldError("public_key", _("This is not an SSH public key."), code="invalid_key")
    if not text.startswith("---- BEGIN SSH2") and len(text.splitlines()) > 1:
        raise FieldError("public_key", _("Paste one public key at a time."), code="several_keys")
    try:
        key = asyncssh.import_public_key(text)
    except (asyncssh.KeyImportError, ValueError):
        raise FieldError("public_key", _("This is not an SSH public key."), code="invalid_key") from None
    return _checked(key)


def _checked(key) -> ParsedKey:
    key_type = key.get_algorithm()
    if key_type not in ACCEPTED_TYPES:
        raise FieldError(
            "public_key",
            _("%(type)s keys are not accepted: use an Ed25519, ECDSA or RSA (2048 bits or more) key.")
            % {"type": key_type},
            code="key_type",
        )
    if key_type == "ssh-rsa" and key.pyca_key.key_size < MIN_RSA_BITS:
        raise FieldError(
            "public_key",
            _("This RSA key has %(bits)d bits; RSA keys need at least %(min)d. An Ed25519 key is better still.")
            % {"bits": key.pyca_key.key_size, "min": MIN_RSA_BITS},
            code="key_too_short",
        )
    comment = key.get_comment() or ""
    openssh = key.export_public_key("openssh").decode().strip()
    return ParsedKey(key_type, key.get_fingerprint("sha256"), openssh, comment.strip())


def add_ssh_key(user, *, public_key, name: str = "") -> SSHKey:
    """Add a public key to ``user``'s account; the name defaults to the key's comment (else its type)."""
    parsed = parse_public_key(public_key)
    default = parsed.comment[:MAX_NAME_LENGTH] or parsed.key_type
    name = name.strip() if isinstance(name, str) else ""
    try:
        name = clean_display_name(name or default, max_length=MAX_NAME_LENGTH, field_label=_("SSH key"))
    except ServiceError as exc:
        raise FieldError("name", exc.message, code=exc.code) from None
    duplicate = FieldError("public_key", _("You have already added this key."), code="duplicate_key", status=409)
    with transaction.atomic():
        # The user's row is the lock: two keys added at once cannot both pass the limit check.
        User.objects.select_for_update().filter(pk=user.pk).first()
        keys = SSHKey.objects.for_user(user)
        if keys.filter(fingerprint=parsed.fingerprint).exists():
            raise duplicate
        if keys.count() >= MAX_SSH_KEYS_PER_USER:
            raise Conflict(
                _("You can have at most %(n)d SSH keys; delete one first.") % {"n": MAX_SSH_KEYS_PER_USER},
                code="too_many_keys",
            )
        try:
            with transaction.atomic():
                return SSHKey.objects.create(
                    user=user,
                    name=name,
                    public_key=parsed.openssh,
                    fingerprint=parsed.fingerprint,
                    key_type=parsed.key_type,
                )
        except IntegrityError:
            raise duplicate from None


def remove_ssh_key(user, public_id) -> SSHKey:
    """Delete one of ``user``'s keys; someone else's key is as missing as one that never existed."""
    key = SSHKey.objects.for_user(user, "change").filter(public_id=public_id).first()
    if key is None:
        raise NotFound(_("No such SSH key."))
    key.delete()
    return key
