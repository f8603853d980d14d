"""Job pages: the list (with a state filter and queue positions), the submit form with its live quote, a job's
page (where it runs and why, its exit code, its log, its machine and bill), and the cancel and rerun buttons."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.errors import Forbidden, NotFound, ServiceError
from core.field_errors import FieldError
from core.htmx import wants_partial
from instances import costs
from instances.models import InstanceEvent
from teams import roles
from teams.context import acting

from . import outputs, services
from .choices import State
from .forms import JobForm
from .models import Job, JobEvent

PAGE_SIZE = 25


@login_required
@require_GET
def job_list(request):
    """The context's jobs, newest first, optionally in one state; queued ones show their place in the queue."""
    state = request.GET.get("state", "")
    jobs = Job.objects.filter(owner=acting(request).account).select_related("chip")
    if state in State.values:
        jobs = jobs.filter(state=state)
    page = Paginator(jobs, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = list(page)
    places = services.queue_places(rows)
    for job in rows:
        job.queue_place = places.get(job.pk)
    context = {
        "page_obj": page,
        "rows": rows,
        "state": state,
        "states": State.choices,
        "any_live": any(job.is_live for job in rows),
    }
    return render(request, "jobs/list.html#rows" if wants_partial(request) else "jobs/list.html", context)


def _quote(request, form) -> dict:
    """The live quote: where the job would run, why, its hourly price and the most it can cost."""
    if not form.is_valid():
        return {}
    job_request = form.job_request()
    try:
        choice = services.quote_job(acting(request).account, job_request)
    except ServiceError as exc:
        return {"problem": exc.message}
    per_hour = job_request.max_price_per_hour or choice.quote.payable_per_hour
    return {
        "choice": choice,
        "reason": Job(choice=choice.figures).choice_reason,
        "max_cost": services.max_cost(job_request.timeout_seconds, per_hour),
        "capped_by_ceiling": job_request.max_price_per_hour is not None,
    }


@login_required
@require_http_methods(["GET", "POST"])
def submit(request):
    """GET: the form (htmx re-renders the quote as it changes); POST: submit."""
    if request.method == "GET":
        data = request.GET if request.GET else None
        form = JobForm(data, initial={"name": "train"})
        context = {"form": form, "show_errors": False, **_quote(request, form)}
        template = "jobs/submit.html#quote" if wants_partial(request) else "jobs/submit.html"
        return render(request, template, context)
    form = JobForm(request.POST)
    if form.is_valid():
        context = acting(request)
        try:
            context.require(roles.OPERATE)
            job = services.submit(context.account, form.job_request(), by=request.user)
        except FieldError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        except ServiceError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, _("Job “%(name)s” is queued.") % {"name": job.name})
            if warning := services.family_warning(job):
                messages.warning(request, warning)
            return redirect(job)
    return render(request, "jobs/submit.html", {"form": form, "show_errors": True}, status=400)


def _own(request, public_id) -> Job:
    action = "view" if request.method in ("GET", "HEAD") else "change"
    try:
        return services.get_job(request.user, public_id, action)
    except NotFound as exc:
        raise Http404(str(exc.message)) from exc
    except Forbidden as exc:
        raise PermissionDenied(str(exc.message)) from exc


def _log(job: Job) -> dict:
    try:
        kept = services.job_log(job)
    except ServiceError as exc:
        return {"lines": [], "simulated": False, "log_error": exc.message}
    return {"lines": kept.lines, "simulated": kept.simulated}


@login_required
@require_GET
def detail(request, public_id):
    job = _own(request, public_id)
    instance_events = list(InstanceEvent.objects.filter(instance=job.instance)) if job.instance else []
    context = {
        "job": job,
        "events": list(JobEvent.objects.filter(job=job).order_by("-at", "-id")),
        "queue_place": services.queue_places([job]).get(job.pk),
        "bill": costs.cost_so_far(job.instance, instance_events) if job.instance else None,
        "log": _log(job),
        "outputs_url": outputs.folder_url(job),
        "outputs_on_cluster": outputs.on_cluster(job),
    }
    return render(request, "jobs/detail.html#live" if wants_partial(request) else "jobs/detail.html", context)


def _act(request, public_id, operation, done_message):
    job = _own(request, public_id)
    try:
        result = operation(job)
    except ServiceError as exc:
        messages.error(request, exc.message)
        result = job
    else:
        messages.success(request, done_message % {"name": job.name})
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Redirect"] = result.get_absolute_url()
        return response
    return redirect(result)


@login_required
@require_POST
def cancel(request, public_id):
    return _act(request, public_id, services.cancel, _("Job “%(name)s” was cancelled; its machine is released."))


@login_required
@require_POST
def rerun(request, public_id):
    return _act(
        request, public_id, lambda job: services.rerun(job, by=request.user), _("Job “%(name)s” is queued again.")
    )
