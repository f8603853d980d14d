"""The Django admin, hidden from everyone but active staff: anyone else gets 404 on every admin URL (not the
admin's login redirect, which would advertise where the back office is). Staff log in through the console."""

from functools import wraps

from django.http import Http404
from django.urls import URLPattern, URLResolver

from accounts.ops import roles


def _staff_only(view):
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not roles.is_staff(request.user):
            raise Http404
        return view(request, *args, **kwargs)

    return wrapped


def _wrap(patterns):
    wrapped = []
    for p in patterns:
        if isinstance(p, URLResolver):
            resolver = URLResolver(p.pattern, _wrap(p.url_patterns), p.default_kwargs, p.app_name, p.namespace)
            wrapped.append(resolver)
        else:
            wrapped.append(URLPattern(p.pattern, _staff_only(p.callback), p.default_args, p.name))
    return wrapped


def staff_only(urls):
    """``admin.site.urls`` with every view wrapped: use as ``path("admin/", staff_only(admin.site.urls))``."""
    patterns, app_name, namespace = urls
    return _wrap(patterns), app_name, namespace
