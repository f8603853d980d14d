"""The user's enterprise verification page: apply, see the status and, after a rejection, the reason."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from . import verification
from .errors import ServiceError
from .forms import EnterpriseVerificationForm


def _page(request, form, status=200):
    context = {"application": verification.current(request.user), "form": form}
    return render(request, "console/enterprise_verification.html", context, status=status)


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
