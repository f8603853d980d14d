"""Time labels for the charts' axes, in the reader's local time.

Events, transactions and statements are shown in the active time zone (``TIME_ZONE``, Asia/Shanghai by default);
a chart whose axis read UTC would put the same moment eight hours apart. Every chart's data takes its labels
from here, so the axes and the rest of the page agree.
"""

from datetime import datetime

from django.utils import timezone

MINUTE_FORMAT = "%H:%M"
SLOT_FORMAT = "%m-%d %H:%M"


def minute_label(at: datetime) -> str:
    """A moment within the last hours: '17:05' local time."""
    return timezone.localtime(at).strftime(MINUTE_FORMAT)


def slot_label(at: datetime) -> str:
    """A moment within the last days: '03-02 17:05' local time."""
    return timezone.localtime(at).strftime(SLOT_FORMAT)
