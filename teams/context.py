"""The context a person works in: their own account, or one team's.

The console remembers the choice per session (the switch in the header); lists show the context's objects, a
launch is owned and paid by the context's account. Addresses of single objects work in any context, subject to the
ownership filter in :mod:`teams.access`. A context that stopped being true (the person left the team, or was
removed) falls back to the personal one at the next request.
"""

from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.utils.translation import gettext as _
from rest_framework.request import Request

from core.errors import Forbidden

from . import roles
from .models import Membership

SESSION_KEY = "teams.context"


@dataclass(frozen=True)
class Acting:
    person: object
    account: object  # who owns and pays: the person, or the team's account
    membership: Membership | None = None

    @property
    def team(self):
        return self.membership.team if self.membership else None

    def can(self, permission: str) -> bool:
        return self.membership is None or roles.can(self.membership.role, permission)

    def require(self, permission: str) -> None:
        if not self.can(permission):
            raise Forbidden(
                _("Your role in %(team)s (%(role)s) does not allow this.")
                % {"team": self.team.name, "role": self.membership.get_role_display()}
            )


def acting(request) -> Acting:
    """The request's context (computed once per request; no query in the personal context). In the API it is the
    token's: a team's token acts in that team, a person's token personally, never a header a caller could set. A
    call of the API from the console's own pages (the session's login, no token) acts in the pages' context."""
    cached = getattr(request, "_teams_acting", None)
    if cached is not None:
        return cached
    person = request.user
    found = Acting(person=person, account=person)
    if isinstance(request, Request) and request.auth is not None:
        team_id = getattr(request.auth, "team_id", None)
        if team_id is not None:
            member = Membership.objects.select_related("team__account").filter(user=person, team_id=team_id).first()
            if member is None:
                raise Forbidden(_("This API token is for a team you are no longer a member of."), code="not_a_member")
            found = Acting(person=person, account=member.team.account, membership=member)
        request._teams_acting = found
        return found
    session = getattr(request, "session", None)
    slug = session.get(SESSION_KEY) if session is not None and person.is_authenticated else None
    if slug:
        member = Membership.objects.select_related("team__account").filter(user=person, team__slug=slug).first()
        if member is None:
            session.pop(SESSION_KEY, None)
        else:
            found = Acting(person=person, account=member.team.account, membership=member)
    request._teams_acting = found
    return found


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def account_for(request, permission: str | None = None):
    """The account the request acts for (the person, or the team of the context), once the context's role allows
    ``permission``: by default VIEW to read (a safe method) and OPERATE to change. Forbidden (403) otherwise."""
    context = acting(request)
    if permission is None:
        permission = roles.VIEW if request.method in SAFE_METHODS else roles.OPERATE
    context.require(permission)
    return context.account


def page_account(request, permission: str = roles.VIEW):
    """:func:`account_for` for a page: a role that does not allow ``permission`` gets Django's 403 page."""
    try:
        return account_for(request, permission)
    except Forbidden as exc:
        raise PermissionDenied(str(exc.message)) from exc


def priced_for(request) -> dict:
    """Whose prices a page quotes (``billing.quote.load_price_book``'s keywords): the wallet that pays in the
    request's context — a team's account, with the person whose own subsidy caps apply — so a page never shows a
    discount the launch will not get (a student's, in a team's context)."""
    context = acting(request)
    if context.team is None:
        return {"user": request.user}
    return {"user": context.account, "person": request.user}


def switch(request, slug: str | None) -> Acting:
    """Work as the team ``slug`` (or personally, for an empty slug) from now on in this session."""
    request._teams_acting = None
    if not slug:
        request.session.pop(SESSION_KEY, None)
    else:
        from .services import membership

        membership(request.user, slug)  # NotFound for a team the person is not in
        request.session[SESSION_KEY] = slug
    return acting(request)


def context_processor(request):
    """``acting`` for the header's context badge: no query in the personal context, the one the request's pages
    share in a team's."""
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    return {"acting": acting(request)}
