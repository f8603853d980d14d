"""Job schedule pages, under /jobs/schedules/: the list, the form (the submit form with a cron expression and its
zone), a schedule's page with what became of its due times, and the suspend, resume and delete buttons."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.errors import Forbidden, NotFound, ServiceError
from core.field_errors import FieldError
from teams import roles
from teams.context import acting

from . import schedules
from .forms import ScheduleForm
from .models import JobSchedule, ScheduleRun

RUNS_SHOWN = 50


@login_required
@require_GET
def schedule_list(request):
    rows = JobSchedule.objects.filter(owner=acting(request).account)
    return render(request, "jobs/schedules.html", {"rows": rows})


@login_required
@require_http_methods(["GET", "POST"])
def schedule_create(request):
    if request.method == "GET":
        form = ScheduleForm(initial={"name": "nightly"})
        return render(request, "jobs/schedule_form.html", {"form": form})
    form = ScheduleForm(request.POST)
    if form.is_valid():
        context = acting(request)
        try:
            context.require(roles.OPERATE)
            made = schedules.create(context.account, form.schedule_request(), by=request.user)
        except FieldError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        except ServiceError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, _("Schedule “%(name)s” is saved.") % {"name": made.name})
            return redirect(made)
    return render(request, "jobs/schedule_form.html", {"form": form}, status=400)


def _own(request, public_id) -> JobSchedule:
    action = "view" if request.method in ("GET", "HEAD") else "change"
    try:
        return schedules.get_schedule(request.user, public_id, action)
    except NotFound as exc:
        raise Http404(str(exc.message)) from exc
    except Forbidden as exc:
        raise PermissionDenied(str(exc.message)) from exc


@login_required
@require_GET
def schedule_detail(request, public_id):
    schedule = _own(request, public_id)
    runs = ScheduleRun.objects.filter(schedule=schedule).select_related("job")[:RUNS_SHOWN]
    return render(request, "jobs/schedule_detail.html", {"schedule": schedule, "runs": runs})


def _act(request, public_id, operation, done_message):
    schedule = _own(request, public_id)
    try:
        operation(schedule)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, done_message % {"name": schedule.name})
    return redirect(schedule)


@login_required
@require_POST
def schedule_suspend(request, public_id):
    return _act(request, public_id, schedules.suspend, _("Schedule “%(name)s” is suspended."))


@login_required
@require_POST
def schedule_resume(request, public_id):
    return _act(request, public_id, schedules.resume, _("Schedule “%(name)s” runs again from now on."))


@login_required
@require_POST
def schedule_delete(request, public_id):
    schedule = _own(request, public_id)
    schedules.delete(schedule)
    messages.success(request, _("Schedule “%(name)s” is deleted; the jobs it ran stay.") % {"name": schedule.name})
    return redirect(reverse("jobs:schedules"))
