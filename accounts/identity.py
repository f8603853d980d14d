"""Personal real-name verification (个人实名认证) and the one check of which actions need it.

A person gives their name and mainland ID number. The number's form is checked here (18 characters, a plausible
region and date of birth, the ISO 7064 MOD 11-2 check character), then the identity provider confirms the pair
(``IDENTITY_PROVIDER``: the development provider accepts every well-formed number and says so; a real one, such as
a carrier or public-security check service, plugs in as a class with the same ``verify`` method). Only a keyed hash
of the number (to refuse the same number on a second account) and its last four characters are kept: the number
never appears in full on a page, in the API, a log line or the admin.

The operator chooses what needs it (``REAL_NAME_REQUIRED_FOR``): ``topup`` (a top-up over
``REAL_NAME_TOPUP_LIMIT`` yuan), ``team`` (creating a team) and ``endpoint`` (publishing an inference endpoint, a
public API). :func:`require` is the one check. An approved enterprise verification counts as well, for the person
who holds it and for the teams they created and own (``accounts.verification.is_verified``).
"""

import hashlib
import hmac
import logging
import re
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.module_loading import import_string
from django.utils.translation import gettext as _
from django.views.decorators.debug import sensitive_variables

from core.errors import Conflict, ServiceError, Unavailable
from core.field_errors import FieldError

from . import verification
from .models import RealNameVerification

log = logging.getLogger(__name__)
WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
CHECK_CHARACTERS = "10X98765432"
# The provinces' two-digit codes (GB/T 2260), Hong Kong, Macao and Taiwan residents' codes included.
PROVINCES = frozenset(
    {
        11,
        12,
        13,
        14,
        15,
        21,
        22,
        23,
        31,
        32,
        33,
        34,
        35,
        36,
        37,
        41,
        42,
        43,
        44,
        45,
        46,
        50,
        51,
        52,
        53,
        54,
        61,
        62,
        63,
        64,
        65,
        71,
        81,
        82,
        83,
    }
)
_HAN = "\u3400-\u9fff\U00020000-\U0003134f"  # CJK unified ideographs, extensions A to G (𠮷 included)
NAME = re.compile(rf"^[{_HAN}·A-Za-z][{_HAN}· A-Za-z.'-]{{0,59}}$")
# What the API accepts, before ``clean_name`` folds each run of white space into one space and ``clean_number``
# drops it: the patterns of the API's schema. A number's format is named too (its region, date of birth and check
# character are more than a pattern says).
NAME_AS_TYPED = rf"^[{_HAN}·A-Za-z](?:[{_HAN}·A-Za-z.'-]|\s+){{0,59}}$"
NUMBER_AS_TYPED = r"^\s*(?:[0-9]\s*){17}[0-9Xx]\s*$"
NUMBER_FORMAT = "cn-resident-id"
ATTEMPTS_PER_DAY = 10
ACTIONS = {"topup", "team", "endpoint"}


class TooManyAttempts(ServiceError):
    status = 429  # a limit on tries, like the API's throttle


class RealNameRequired(ServiceError):
    status = 403
    code = "real_name_required"


def check_character(first17: str) -> str:
    """The ISO 7064 MOD 11-2 check character that completes the first 17 digits of an ID number."""
    return CHECK_CHARACTERS[sum(int(d) * w for d, w in zip(first17, WEIGHTS, strict=True)) % 11]


@sensitive_variables("value", "number")
def clean_number(value: str, today: date | None = None) -> str:
    """The number in upper case without spaces, or a FieldError that says what is wrong with it."""
    number = re.sub(r"\s", "", value or "").upper()
    if not re.fullmatch(r"\d{17}[\dX]", number):
        raise FieldError("number", _("An ID number has 18 characters: 17 digits and a digit or X."), code="invalid_id")
    today = today or timezone.localdate()
    try:
        born = date(int(number[6:10]), int(number[10:12]), int(number[12:14]))
    except ValueError:
        born = None
    if int(number[:2]) not in PROVINCES or born is None or not date(1900, 1, 1) <= born <= today:
        raise FieldError(
            "number", _("This is not a valid ID number: check the region and date of birth."), code="invalid_id"
        )
    if check_character(number[:17]) != number[17]:
        raise FieldError(
            "number", _("This ID number's last character does not match: check it for a typo."), code="invalid_id"
        )
    return number


def clean_name(value: str) -> str:
    name = re.sub(r"\s+", " ", (value or "").strip())
    if not NAME.match(name):
        raise FieldError("real_name", _("Enter your name as it is on your ID card."), code="invalid_name")
    return name


def _hash(number: str) -> str:
    # Its own key (IDENTITY_HASH_KEY, by default SECRET_KEY): it must never change, or a number verified before
    # would no longer be recognised on a second account.
    key = hashlib.sha256(("gpucloud.identity:" + settings.IDENTITY_HASH_KEY).encode()).digest()
    return hmac.new(key, number.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Answer:
    ok: bool
    reason: str = ""


class DevelopmentProvider:
    """Accepts every well-formed number with any name, for development and tests; it checks nothing against a
    register, and the verification page says so while it is configured. In production it verifies nobody, so
    what needs verification stays closed until the operator sets a real provider."""

    name = "development"
    simulated = True

    def verify(self, real_name: str, number: str) -> Answer:
        if settings.PRODUCTION:
            return Answer(ok=False, reason=_("real-name verification is not set up on this console yet."))
        return Answer(ok=True)


def provider():
    return import_string(settings.IDENTITY_PROVIDER)()


def status(user) -> RealNameVerification | None:
    return RealNameVerification.objects.filter(user=user).first()


def _count_attempt(user) -> None:
    """At most ATTEMPTS_PER_DAY tries a day: nobody can use the form to find out which numbers are registered."""
    key = f"identity-attempts:{user.pk}:{timezone.localdate().isoformat()}"
    cache.add(key, 0, 60 * 60 * 25)
    if cache.incr(key) > ATTEMPTS_PER_DAY:
        raise TooManyAttempts(
            _("Too many attempts today: try again tomorrow, or contact support."), code="too_many_attempts"
        )


@sensitive_variables()
def verify(user, *, real_name: str, number: str) -> RealNameVerification:
    """Verify ``user`` as the holder of ``number``. Refused when already verified, when the number is malformed,
    when the provider does not confirm the pair (with its reason), or when the number verifies another account."""
    if status(user) is not None:
        raise Conflict(_("Your account is already verified."), code="already_verified")
    real_name, number = clean_name(real_name), clean_number(number)
    _count_attempt(user)
    checker = provider()
    try:
        answer = checker.verify(real_name, number)
    except Exception as exc:  # noqa: BLE001 (a provider that is down or answers nonsense: say so, never a 500)
        log.warning("identity provider %s failed: %s", checker.name, type(exc).__name__)
        raise Unavailable(_("Verification is not available right now: try again in a few minutes.")) from None
    if not answer.ok:
        raise ServiceError(
            _("The name and ID number could not be verified: %(reason)s") % {"reason": answer.reason},
            code="not_verified",
        )
    digest = _hash(number)  # asked only for a pair the provider confirmed
    if RealNameVerification.objects.filter(number_hash=digest).exists():
        raise FieldError("number", _("This ID number already verifies another account."), code="id_in_use")
    try:
        with transaction.atomic():
            return RealNameVerification.objects.create(
                user=user, real_name=real_name, number_hash=digest, number_last4=number[-4:], provider=checker.name
            )
    except IntegrityError as exc:  # the same number, or this account, verified at the same moment elsewhere
        raise Conflict(_("This ID number already verifies another account."), code="id_in_use") from exc


def needed_for(action: str, amount: Decimal | None = None) -> bool:
    """Whether the operator requires verification for ``action`` (of ``amount``, for a top-up)."""
    if action not in set(settings.REAL_NAME_REQUIRED_FOR):
        return False
    if action == "topup":
        return amount is not None and amount > Decimal(settings.REAL_NAME_TOPUP_LIMIT)
    return True


def is_satisfied(user, account=None) -> bool:
    """Whether ``user`` (acting for ``account``, a team's account, when given) passes the real-name check: they
    are verified by name, or are a verified enterprise, or act for the team of a verified enterprise."""
    if status(user) is not None or verification.is_verified(user):
        return True
    return account is not None and account != user and verification.is_verified(account)


def require(user, action: str, *, amount: Decimal | None = None, account=None) -> None:
    """Raise RealNameRequired, saying why and where to verify, when ``action`` needs a verification ``user`` lacks.
    ``account`` is whose the action is when ``user`` acts for a team."""
    if not needed_for(action, amount) or is_satisfied(user, account):
        return
    where = reverse("console:real-name")
    if action == "topup":
        message = _("Top-ups over ¥%(limit)s need real-name verification first: verify at %(url)s") % {
            "limit": settings.REAL_NAME_TOPUP_LIMIT,
            "url": where,
        }
    elif action == "endpoint":
        message = _("Publishing an inference endpoint needs real-name verification first: verify at %(url)s") % {
            "url": where
        }
    else:
        message = _("Creating a team needs real-name verification first: verify at %(url)s") % {"url": where}
    raise RealNameRequired(message)
