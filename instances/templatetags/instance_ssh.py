"""``{% instance_ssh instance as ssh %}``: the SSH command of a running instance for its page, or None."""

from django import template

from console.models import SSHKey
from instances.ssh_access import ssh_access

register = template.Library()


@register.simple_tag(takes_context=True)
def instance_ssh(context, instance):
    """``{"access": SSHAccess, "has_keys": bool}`` while the instance can be entered, else None."""
    request = context["request"]
    access = ssh_access(instance, request.get_host())
    if access is None:
        return None
    if instance.owner_id != request.user.pk:
        # The gateway lets in the owner's keys; a team's account has none, so no command that leads nowhere.
        return {"team": True}
    return {"access": access, "has_keys": SSHKey.objects.for_user(request.user).exists()}
