"""The verification pages: enterprise verification (apply, the status and, after a rejection, the reason) and
personal real-name verification."""

from decimal import Decimal

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import pgettext
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods

from billing.models import SubsidyProgramme
from core.errors import ServiceError
from core.field_errors import FieldError

from .. import identity, students, verification
from ..forms import EnterpriseVerificationForm, RealNameForm, StudentAddressForm, StudentCodeForm


def _page(request, form, status=200):
    context = {"application": verification.current(request.user), "form": form}
    return render(request, "accounts/enterprise_verification.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def enterprise_verification(request):
    if request.method == "GET":
        return _page(request, EnterpriseVerificationForm())
    form = EnterpriseVerificationForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=400)
    try:
        verification.apply(request.user, **form.cleaned_data)
    except ServiceError as exc:
        form.add_error("licence_number" if exc.code == "invalid_licence_number" else None, exc.message)
        return _page(request, form, status=400)
    messages.success(request, _("Application sent. We review it within one working day."))
    return redirect("console:enterprise-verification")


def _needed_for() -> list[str]:
    """What the operator asks real-name verification for here, said as the page lists it."""
    said = {
        "topup": _("top-ups over ¥%(limit)s") % {"limit": settings.REAL_NAME_TOPUP_LIMIT},
        "team": _("creating a team"),
        "endpoint": _("publishing an inference endpoint"),
    }
    return [phrase for action, phrase in said.items() if identity.needed_for(action, Decimal("Infinity"))]


def _real_name_page(request, form, status=200):
    context = {
        "verification": identity.status(request.user),
        "form": form,
        "simulated": getattr(identity.provider(), "simulated", False),
        "needed_for": _needed_for(),
        "list_separator": pgettext("list separator", ", "),
    }
    return render(request, "accounts/real_name.html", context, status=status)


@sensitive_post_parameters("number")
@login_required
@require_http_methods(["GET", "POST"])
def real_name(request):
    if request.method == "GET":
        return _real_name_page(request, RealNameForm())
    form = RealNameForm(request.POST)
    status = 400
    if form.is_valid():
        try:
            identity.verify(request.user, **form.cleaned_data)
        except ServiceError as exc:
            form.add_error(exc.field if isinstance(exc, FieldError) and exc.field in form.fields else None, exc.message)
            status = exc.status
        else:
            messages.success(request, _("Verified. Thank you."))
            return redirect("console:real-name")
    form.data = form.data.copy()
    form.data["number"] = ""  # the number is never sent back, not even into the form after an error
    return _real_name_page(request, form, status=status)


def _student_page(request, *, address_form=None, code_form=None, status=200):
    context = {
        "verification": students.status(request.user),
        "programmes": list(SubsidyProgramme.objects.filter(eligibility="student", active=True)),
        "address_form": address_form or StudentAddressForm(),
        "code_form": code_form or StudentCodeForm(),
        "code_minutes": students.CODE_MINUTES,
    }
    return render(request, "accounts/student.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def student(request):
    """GET: the status, the programme and the forms; POST ``send``: mail a code; POST ``confirm``: check it."""
    if request.method == "GET":
        return _student_page(request)
    if "code" in request.POST:
        form = StudentCodeForm(request.POST)
        if form.is_valid():
            try:
                students.confirm(request.user, form.cleaned_data["code"])
            except ServiceError as exc:
                form.add_error("code" if isinstance(exc, FieldError) else None, exc.message)
                return _student_page(request, code_form=form, status=exc.status)
            messages.success(request, _("Verified: the student prices apply from now on."))
            return redirect("console:student")
        return _student_page(request, code_form=form, status=400)
    form = StudentAddressForm(request.POST)
    if form.is_valid():
        try:
            sent = students.send_code(request.user, form.cleaned_data["email"])
        except ServiceError as exc:
            form.add_error("email" if isinstance(exc, FieldError) else None, exc.message)
            return _student_page(request, address_form=form, status=exc.status)
        messages.success(request, _("We sent a code to %(email)s.") % {"email": sent.email})
        return redirect("console:student")
    return _student_page(request, address_form=form, status=400)
