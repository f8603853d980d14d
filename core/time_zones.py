"""The time zone a user picks for a schedule (a job's cron, an instance's daily stop and start): an IANA name,
Asia/Shanghai unless another is given. One rule, used by every schedule and named in the API's schema."""

import zoneinfo

from django.utils.translation import gettext as _

from core.field_errors import FieldError

DEFAULT_TIMEZONE = "Asia/Shanghai"
# The name of this rule's format in the API's schema, and what it says.
TIMEZONE_FORMAT = "iana-time-zone"
TIMEZONE_RULES = "An IANA time zone name, e.g. Asia/Shanghai or Europe/Berlin."


def clean_timezone(name, field: str = "timezone") -> str:
    """The zone's name if this host knows it (empty: Asia/Shanghai); FieldError on ``field`` otherwise."""
    text = str(name or "").strip() or DEFAULT_TIMEZONE
    if text not in zoneinfo.available_timezones():
        raise FieldError(
            field, _("Unknown time zone “%(zone)s”: use e.g. Asia/Shanghai.") % {"zone": text}, code="invalid_tz"
        )
    return text
