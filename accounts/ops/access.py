"""Who may open a back-office page: the one decorator the staff pages (and the marketplace's review pages) use.

A kernel of the back office with the staff roles, the audit log and its choices: it imports no app, so the apps
below the back office may use it (``.importlinter``, the staff kernel contract).
"""

from functools import wraps

from django.http import Http404
from django.shortcuts import render
from django.utils.translation import gettext as _

from . import roles


def staff_view(permission: str | None = None):
    """404 for anyone who is not active staff; 403 for staff without ``permission``."""

    def decorate(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not roles.is_staff(request.user):
                raise Http404
            if permission and not roles.can(request.user, permission):
                return forbidden(request)
            try:
                return view(request, *args, **kwargs)
            except roles.Forbidden:
                return forbidden(request)

        return wrapped

    return decorate


def forbidden(request):
    message = _("Your staff role does not allow this page or action.")
    return render(request, "error.html", {"status": 403, "message": message}, status=403)
