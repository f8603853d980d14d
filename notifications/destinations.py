"""Which URLs the console may POST a notification to: a public HTTPS address, never the console's own network.

A webhook URL is the user's to choose, so without this check it is a way to make the console's workers send
requests into the operator's private network (server-side request forgery). The host is resolved and every address
must be public: private, loopback, link-local, carrier-grade NAT (100.64.0.0/10), multicast and reserved ranges are
refused — when the channel is saved and again before each send, since a name can be pointed elsewhere later.

The one exception is for development and the test suite: with ``NOTIFICATIONS_ALLOW_LOOPBACK`` on, plain HTTP to
``localhost``/``127.0.0.1``/``::1`` is allowed (and nothing else private is).
"""

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from django.utils.translation import gettext as _

from core.addresses import is_public
from core.errors import ServiceError

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


class RefusedDestination(ServiceError):
    code = "refused_destination"


@dataclass(frozen=True)
class Destination:
    """A checked URL and the address to connect to: the sender connects to this address, not to whatever the name
    resolves to a moment later, so a name re-pointed between the check and the send reaches nothing private."""

    scheme: str
    host: str
    port: int
    address: str


def _addresses(host: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        return [ipaddress.ip_address(host)]  # a literal address: no lookup
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise RefusedDestination(_("The host %(host)s cannot be resolved.") % {"host": host}) from exc
    return [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]


def _public(address) -> bool:
    return is_public(address)


def check(url: str) -> Destination:
    """Where ``url`` may be sent (its host resolved now); :class:`RefusedDestination` if it may not."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    loopback_allowed = settings.NOTIFICATIONS_ALLOW_LOOPBACK and host in LOOPBACK_NAMES
    if not host:
        raise RefusedDestination(_("Enter a full URL, such as https://example.com/hook."))
    if parts.scheme != "https" and not (parts.scheme == "http" and loopback_allowed):
        raise RefusedDestination(_("The URL must start with https://."))
    addresses = _addresses(host)
    if not addresses:
        raise RefusedDestination(_("The host %(host)s cannot be resolved.") % {"host": host})
    for address in addresses:
        if _public(address) or (loopback_allowed and address.is_loopback):
            continue
        raise RefusedDestination(
            _("%(host)s is a private or reserved address; notifications go to public addresses only.") % {"host": host}
        )
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise RefusedDestination(_("Enter a full URL, such as https://example.com/hook.")) from exc
    return Destination(parts.scheme, host, port, str(addresses[0]))
