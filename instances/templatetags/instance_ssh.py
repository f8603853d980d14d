"""``{% instance_ssh instance as ssh %}``: the SSH command of a running instance for its page, or None."""

from django import template

from accounts.models import SSHKey
from instances.ssh_access import may_enter, ssh_access

register = template.Library()


@register.simple_tag(takes_context=True)
def instance_ssh(context, instance):
    """``{"access": SSHAccess, "has_keys": bool}`` while the instance can be entered, else None."""
    request = context["request"]
    access = ssh_access(instance, request.get_host())
    if access is None:
        return None
    can_operate = context.get("can_operate")  # the page knows it already; else one query
    if instance.owner_id != request.user.pk and not (
        can_operate if can_operate is not None else may_enter(request.user, instance)
    ):
        # The gateway lets in only the keys of people who may operate the instance: no command that leads nowhere.
        return {"denied": True}
    return {"access": access, "has_keys": SSHKey.objects.for_user(request.user).exists()}


def _may_operate(context, user, instance) -> bool:
    """The instance page knows it already (``can_operate``); elsewhere one query."""
    known = context.get("can_operate")
    return known if known is not None else may_enter(user, instance)
