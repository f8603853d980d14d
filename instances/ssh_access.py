"""How a user reaches a running instance over SSH: through the gateway (``instances.ssh_gateway``), as
``ssh -p <port> <instance-id>@<host>``. The instance page and the API show that command; the CLI runs it."""

from dataclasses import dataclass

from django.conf import settings
from django.http.request import split_domain_port
from django.utils.translation import gettext as _

from core.errors import Conflict
from teams.access import owned

from .backends import Backend, get_backend
from .choices import Status
from .models import Instance


@dataclass(frozen=True)
class SSHAccess:
    host: str
    port: int
    user: str  # the instance's public id: the gateway finds the instance by it

    @property
    def command(self) -> str:
        return f"ssh -p {self.port} {self.user}@{self.host}"


def refusal(instance: Instance) -> str | None:
    """Why the gateway cannot open a shell in ``instance`` now, or None when it can. The simulated backend runs
    no machine, and a backend that keeps the base class's ``enter_argv`` refuses every login:
    neither is offered a command that cannot work."""
    if instance.kind != Instance.Kind.INSTANCE:
        return _("An inference endpoint has no shell to log in to.")
    if instance.status != Status.RUNNING:
        return _("The instance is not running: start it first.")
    backend = get_backend(instance.backend_name)
    if backend.simulated:
        return _("Simulated: there is no machine to enter.")
    if type(backend).enter_argv is Backend.enter_argv:
        return _("Instances on the %(backend)s backend cannot be entered over SSH yet.") % {"backend": backend.name}
    return None


def public_host(request_host: str) -> str:
    """The host name users connect to: ``SSH_GATEWAY_PUBLIC_HOST``, else the one the page was asked for."""
    if settings.SSH_GATEWAY_PUBLIC_HOST:
        return settings.SSH_GATEWAY_PUBLIC_HOST
    domain, _port = split_domain_port(request_host)
    return domain.strip("[]") or "127.0.0.1"


def ssh_access(instance: Instance, request_host: str) -> SSHAccess | None:
    """The SSH command for ``instance``, or None while it cannot be entered."""
    if refusal(instance) is not None:
        return None
    return SSHAccess(public_host(request_host), settings.SSH_GATEWAY_PORT, str(instance.public_id))


def require_ssh_access(instance: Instance, request_host: str) -> SSHAccess:
    """The SSH command for ``instance``; ``Conflict`` saying why when it cannot be entered now."""
    if (reason := refusal(instance)) is not None:
        raise Conflict(reason, code="not_enterable")
    return SSHAccess(public_host(request_host), settings.SSH_GATEWAY_PORT, str(instance.public_id))


def may_enter(user, instance: Instance) -> bool:
    """Whether ``user``'s keys open ``instance`` at the gateway: they may operate it (its owner, or a member of its
    team whose role may)."""
    return Instance.objects.filter(owned(user, "change"), pk=instance.pk).exists()
