"""The instance page's daily stop and start (定时开关机): save or clear the times, then back to the page."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from core.errors import Forbidden, NotFound, ServiceError

from .. import daily_power, lifecycle
from ..forms import DailyPowerForm


@login_required
@require_POST
def save(request, public_id):
    try:
        instance = lifecycle.get_instance(request.user, public_id, "change")
    except NotFound as exc:
        raise Http404(str(exc.message)) from exc
    except Forbidden as exc:
        raise PermissionDenied(str(exc.message)) from exc
    form = DailyPowerForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(str(e) for errors in form.errors.values() for e in errors))
        return redirect(instance)
    data = form.cleaned_data
    try:
        daily_power.set_daily(instance, data["stop_at"], data["start_at"], data["timezone"])
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("Daily stop and start saved."))
    return redirect(instance)
