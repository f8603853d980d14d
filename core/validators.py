"""Validators shared by every app: the one rule for names users give their objects, and password validators whose
messages are translated in both of our languages."""

import unicodedata

from django.contrib.auth import password_validation
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from .errors import ServiceError

# Characters that change how the text around them is shown: the bidirectional embeddings and overrides
# (U+202A–U+202E), isolates (U+2066–U+2069) and marks (U+200E, U+200F, U+061C). A name holding one can display as
# something else ("invoice" + U+202E + "fdp.exe" shows as "invoiceexe.pdf") in the console, the back office, CSV
# exports and e-mails. Control characters (category Cc: U+0000–U+001F, U+007F–U+009F) and the line and paragraph
# separators break lines, logs and exports.
TEXT_DIRECTION_CHARACTERS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


_REFUSED_CLASS = r"\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c"


# The rule as a pattern, for the API's schema: some character other than white space, none of the refused ones
# (the length, counted once trimmed, is the field's own ``maxLength``).
def display_name_pattern(also_refused: str = "") -> str:
    """``also_refused``: more characters refused (a character class's contents, e.g. "/")."""
    refused = _REFUSED_CLASS + also_refused
    return rf"^[^{refused}]*[^\s{refused}][^{refused}]*$"


DISPLAY_NAME_PATTERN = display_name_pattern()


def _refused_character(name: str) -> str | None:
    for char in name:
        if char in TEXT_DIRECTION_CHARACTERS or unicodedata.category(char) in {"Cc", "Zl", "Zp"}:
            return char
    return None


def clean_display_name(value, *, max_length: int, field_label: str, code: str = "invalid_name") -> str:
    """A name a user gives one of their objects (instance, disk, image, API token…), the same rule everywhere:
    NFC-normalised (one name whether typed decomposed or not), free of control and text-direction characters, and
    1 to ``max_length`` characters once trimmed. ``field_label`` is what is named, translated and in lower case
    (``_("instance")``). Raises ``ServiceError`` with ``code`` and a translated message."""
    name = unicodedata.normalize("NFC", value) if isinstance(value, str) else ""
    # Checked before trimming: str.strip() also drops some control characters (U+001C–U+001F, U+0085), which
    # would quietly change the name instead of saying what is wrong with it.
    if (char := _refused_character(name)) is not None:
        raise ServiceError(
            _("The %(field)s name cannot contain control or text-direction characters (found U+%(code)04X).")
            % {"field": field_label, "code": ord(char)},
            code=code,
        )
    name = name.strip()
    if not name or len(name) > max_length:
        raise ServiceError(
            _("Give the %(field)s a name of 1 to %(max)d characters.") % {"field": field_label, "max": max_length},
            code=code,
        )
    return name


class MinimumLengthValidator(password_validation.MinimumLengthValidator):
    # Django 5.2's own message changed its msgid without the Chinese catalogue following, so it would show
    # in English on a Chinese page; this one is in our catalogue.
    def get_error_message(self):
        return ngettext(
            "This password is too short: use at least %(n)d character.",
            "This password is too short: use at least %(n)d characters.",
            self.min_length,
        ) % {"n": self.min_length}
