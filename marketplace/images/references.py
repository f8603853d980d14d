"""Container image references (``registry/namespace/name:tag`` or ``…@sha256:…``) and which registries the console
will talk to.

A reference without a registry is Docker Hub's, as ``docker pull`` reads it. A registry whose host is, or resolves
to, a private, loopback, link-local or otherwise non-public address is refused before anything is sent to it: the
worker that copies images sits beside the console's database and services. The one exception is the host's own
loopback when ``IMAGE_IMPORT_ALLOW_LOOPBACK`` is on (the tests' local registry); it is off in production.
"""

import ipaddress
import re
import socket
from dataclasses import dataclass

from django.conf import settings
from django.utils.translation import gettext as _

from core.addresses import is_public
from core.errors import ServiceError

DOCKER_HUB = "docker.io"
MAX_REFERENCE = 500
REFERENCE_FORMAT = "image-reference"
REFERENCE_RULES = (
    "registry/namespace/name:tag or registry/namespace/name@sha256:<64 hex digits> (a bare name is Docker Hub's): "
    "lowercase path components of letters, digits and . _ -; a tag of letters, digits and _ . - up to 128"
)
# The grammar of the distribution spec (github.com/distribution/reference), without its rarely used corners.
COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
PATH = re.compile(rf"^{COMPONENT}(?:/{COMPONENT})*$")
TAG = re.compile(r"^[\w][\w.-]{0,127}$")
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
HOST = re.compile(rf"^(?:{LABEL}(?:\.{LABEL})*|\[[0-9a-fA-F:.]+\])(?::[0-9]{{1,5}})?$")


class BadReference(ServiceError):
    code = "invalid_reference"


class RegistryRefused(ServiceError):
    status = 403
    code = "registry_refused"


@dataclass(frozen=True)
class Reference:
    registry: str  # host[:port]
    path: str
    tag: str = ""
    digest: str = ""

    def __str__(self) -> str:
        return (
            f"{self.registry}/{self.path}{':' + self.tag if self.tag else ''}{'@' + self.digest if self.digest else ''}"
        )

    @property
    def host(self) -> str:
        if self.registry.startswith("["):
            return self.registry[1:].split("]", 1)[0]
        return self.registry.split(":", 1)[0]

    @property
    def transport(self) -> str:
        """The reference as skopeo's ``docker://`` transport takes it."""
        return f"docker://{self}"


def parse(text: str) -> Reference:
    """The reference ``text`` names, fully qualified; a malformed one is a 400 that says what a reference looks like."""
    text = (text or "").strip()
    invalid = BadReference(
        _("“%(text)s” is not an image reference: use registry/namespace/name:tag or …@sha256:<digest>.")
        % {"text": text[:100]}
    )
    if not text or len(text) > MAX_REFERENCE or any(c.isspace() for c in text):
        raise invalid
    rest, _at, digest = text.partition("@")
    if digest and not DIGEST.match(digest):
        raise invalid
    first, slash, remainder = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost" or first.startswith("[")):
        registry, rest = first, remainder
    else:
        registry = DOCKER_HUB
    path, tag = rest, ""
    if ":" in rest.rsplit("/", 1)[-1]:
        path, tag = rest.rsplit(":", 1)
    if registry == DOCKER_HUB and "/" not in path:
        path = f"library/{path}"
    if not HOST.match(registry) or not PATH.match(path) or (tag and not TAG.match(tag)):
        raise invalid
    return Reference(registry=registry, path=path, tag=tag or ("" if digest else "latest"), digest=digest)


def addresses(host: str) -> set[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        return {ipaddress.ip_address(host)}
    except ValueError:
        pass
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise RegistryRefused(_("The registry “%(host)s” cannot be found.") % {"host": host}) from exc
    return {ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in found}


def allowed(address) -> bool:
    if address.is_loopback:
        return bool(settings.IMAGE_IMPORT_ALLOW_LOOPBACK)
    return is_public(address)


def check_registry(reference: Reference) -> bool:
    """Refuse a registry on a non-public address (every address its name resolves to is checked). Returns whether
    it is the host's own loopback (allowed by the setting), which is spoken to without TLS."""
    addresses_found = addresses(reference.host)
    refused = [a for a in addresses_found if not allowed(a)]
    if not addresses_found or refused:
        raise RegistryRefused(
            _("Images are imported only from registries on public addresses; “%(host)s” is not one.")
            % {"host": reference.host}
        )
    return all(a.is_loopback for a in addresses_found)
