"""The notification settings pages: the account's channels, one channel's settings and delivery log, a test send.

Lists show the channels of the context's account (the person's, or the team's); a team's owners and admins change
them. Every change goes through :mod:`notifications.services`, as the API's do.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from core.errors import Forbidden, NotFound, ServiceError
from core.field_errors import FieldError
from core.htmx import wants_partial
from teams import roles
from teams.context import acting, page_account

from . import services
from .forms import ChannelForm
from .models import Channel, Delivery

LOG_ROWS = 50


def _save(request, form, save):
    """Run ``save`` on a valid form; a refused value is shown beside its field. The saved channel, or None."""
    if not form.is_valid():
        return None
    try:
        return save()
    except FieldError as exc:
        form.add_error(exc.field if exc.field in form.fields else None, exc.message)
    except ServiceError as exc:
        form.add_error(None, exc.message)
    return None


def _list_page(request, form, status=200):
    context = acting(request)
    channels = Channel.objects.for_user(request.user).filter(owner=context.account)
    page = {"form": form, "channels": channels, "can_manage": context.can(roles.MEMBERS), "team": context.team}
    template = "notifications/channels.html#channel-panel" if wants_partial(request) else "notifications/channels.html"
    return render(request, template, page, status=200 if wants_partial(request) else status)


@login_required
@require_http_methods(["GET", "POST"])
def channel_list(request):
    if request.method == "GET":
        return _list_page(request, ChannelForm())
    account = page_account(request, roles.MEMBERS)
    form = ChannelForm(request.POST)
    channel = _save(request, form, lambda: services.create_channel(account, form.spec(keep_secret=False)))
    if channel is None:
        return _list_page(request, form, status=400)
    messages.success(request, _("Channel “%(name)s” added.") % {"name": channel.name})
    if wants_partial(request):
        return _list_page(request, ChannelForm())
    return redirect("notifications:channel", channel.public_id)


def _channel(request, public_id, action="view"):
    try:
        return services.get_channel(request.user, public_id, action)
    except NotFound as exc:
        raise Http404(exc.message) from exc  # someone else's channel: the same 404 as a missing one
    except Forbidden as exc:
        raise PermissionDenied(str(exc.message)) from exc  # a team member whose role only lets them look


def _detail_page(request, channel, form, *, tested=None, status=200):
    deliveries = Delivery.objects.filter(channel=channel).select_related("notification")[:LOG_ROWS]
    can_manage = Channel.objects.for_user(request.user, "change").filter(pk=channel.pk).exists()
    page = {"channel": channel, "form": form, "deliveries": deliveries, "tested": tested, "can_manage": can_manage}
    template = "notifications/channel.html#delivery-panel" if tested else "notifications/channel.html"
    return render(request, template, page, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def channel_detail(request, public_id):
    if request.method == "GET":
        channel = _channel(request, public_id)
        return _detail_page(request, channel, ChannelForm.for_channel(channel))
    channel = _channel(request, public_id, "change")
    form = ChannelForm(request.POST)
    saved = _save(request, form, lambda: services.update_channel(request.user, public_id, form.spec(keep_secret=True)))
    if saved is None:
        return _detail_page(request, channel, form, status=400)
    messages.success(request, _("Channel “%(name)s” saved.") % {"name": saved.name})
    return redirect("notifications:channel", saved.public_id)


@login_required
@require_POST
def channel_delete(request, public_id):
    _channel(request, public_id, "delete")
    channel = services.delete_channel(request.user, public_id)
    messages.success(request, _("Channel “%(name)s” deleted.") % {"name": channel.name})
    return redirect("notifications:channels")


@login_required
@require_POST
def channel_test(request, public_id):
    """Send a test event now and show its outcome (htmx swaps the delivery log; without htmx, the page reloads)."""
    channel = _channel(request, public_id, "change")
    delivery = services.send_test(request.user, public_id)
    if wants_partial(request):
        return _detail_page(request, channel, None, tested=delivery)
    if delivery.status == "sent":
        messages.success(
            request, _("Test sent: the receiver answered %(code)s.") % {"code": delivery.response_code or "OK"}
        )
    else:
        messages.error(request, _("The test failed: %(error)s") % {"error": delivery.error})
    return redirect("notifications:channel", channel.public_id)
