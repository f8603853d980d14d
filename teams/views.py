"""Team pages: your teams and invitations, one team's members and invitations, and the invitation link."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from accounts.account_adapter import AFTER_LOGIN_SESSION_KEY
from core.errors import Forbidden, NotFound, ServiceError
from core.field_errors import FieldError

from . import context, roles, services
from .forms import InvitationForm, TeamForm
from .roles import Role


def _member(request, slug):
    try:
        return services.membership(request.user, slug)
    except NotFound as exc:
        raise Http404(str(exc.message)) from exc


def _refuse(form, exc: ServiceError) -> None:
    field = exc.field if isinstance(exc, FieldError) and exc.field in form.fields else None
    form.add_error(field, str(exc.message))


@login_required
@require_http_methods(["GET", "POST"])
def team_list(request):
    form = TeamForm(request.POST or None)
    status, verify_first = 200, False
    if request.method == "POST":
        if form.is_valid():
            try:
                team = services.create_team(request.user, **form.cleaned_data)
            except ServiceError as exc:
                _refuse(form, exc)
                status, verify_first = exc.status, exc.code == "real_name_required"
            else:
                messages.success(
                    request, _("Team %(team)s created. Invite the people you work with.") % {"team": team.name}
                )
                return redirect("teams:detail", team.slug)
        else:
            status = 400
    context = {
        "memberships": services.teams_of(request.user),
        "invitations": [(i, services.invitation_token(i)) for i in services.open_invitations_for(request.user)],
        "form": form,
        "verify_first": verify_first,
    }
    return render(request, "teams/list.html", context, status=status)


def _detail(request, member, invite_form=None, status=200):
    team = member.team
    manage = roles.can(member.role, roles.MEMBERS)
    context = {
        "team": team,
        "me": member,
        "manage": manage,
        "own": roles.can(member.role, roles.OWN),
        "members": team.memberships.select_related("user").order_by("joined_at", "id"),
        "invitations": team.invitations.filter(accepted_at__isnull=True, revoked_at__isnull=True).order_by(
            "-created_at"
        )
        if manage
        else [],
        "events": services.events(member) if manage else [],
        "invite_form": invite_form or InvitationForm(member=member),
        "role_choices": [
            (value, label) for value, label in Role.choices if value != Role.OWNER or roles.can(member.role, roles.OWN)
        ],
        "invitation_days": services.invitation_days(),
    }
    return render(request, "teams/detail.html", context, status=status)


@login_required
def team_detail(request, slug):
    return _detail(request, _member(request, slug))


def _act(request, slug, action, done):
    """Run ``action(member)`` for a POST on a team page and come back to it with a message."""
    member = _member(request, slug)
    try:
        action(member)
    except Forbidden as exc:
        messages.error(request, str(exc.message))
        return _detail(request, member, status=403)
    except NotFound as exc:
        raise Http404(str(exc.message)) from exc
    except ServiceError as exc:
        messages.error(request, str(exc.message))
        return _detail(request, member, status=exc.status)
    if done:
        messages.success(request, done)
    return None


@login_required
@require_POST
def team_invite(request, slug):
    member = _member(request, slug)
    form = InvitationForm(request.POST, member=member)
    if form.is_valid():
        try:
            invitation = services.invite(member, form.cleaned_data["email"], form.cleaned_data["role"])
        except Forbidden as exc:
            messages.error(request, str(exc.message))
            return _detail(request, member, status=403)
        except ServiceError as exc:
            _refuse(form, exc)
        else:
            messages.success(request, _("Invitation sent to %(email)s.") % {"email": invitation.email})
            return redirect("teams:detail", slug)
    return _detail(request, member, invite_form=form, status=400)


@login_required
@require_POST
def member_role(request, slug, user_id):
    refused = _act(
        request,
        slug,
        lambda member: services.change_role(member, user_id, request.POST.get("role", "")),
        _("Role changed."),
    )
    return refused or redirect("teams:detail", slug)


@login_required
@require_POST
def member_remove(request, slug, user_id):
    leaving = services.is_self(request.user, user_id)
    refused = _act(
        request,
        slug,
        lambda member: services.remove_member(member, user_id),
        _("You left the team.") if leaving else _("Member removed."),
    )
    if refused:
        return refused
    return redirect("teams:list") if leaving else redirect("teams:detail", slug)


@login_required
@require_POST
def invitation_revoke(request, slug, invitation_id):
    refused = _act(
        request, slug, lambda member: services.revoke_invitation(member, invitation_id), _("Invitation withdrawn.")
    )
    return refused or redirect("teams:detail", slug)


@require_http_methods(["GET", "POST"])
def invitation(request, token):
    """The link from the e-mail: who invites you to what; sign up or log in first, then join."""
    try:
        invite = services.read_invitation(token)
    except NotFound as exc:
        return render(request, "teams/invitation.html", {"gone": str(exc.message)}, status=404)
    here = reverse("teams:invitation", args=[token])
    context = {"invitation": invite, "next": here, "error": ""}
    if not request.user.is_authenticated:
        request.session[AFTER_LOGIN_SESSION_KEY] = here  # signing up and verifying first: the login comes back here
    if request.method == "POST":
        if not request.user.is_authenticated:
            return redirect(f"{reverse('account_login')}?next={here}")
        try:
            joined = services.accept(request.user, token)
        except NotFound as exc:
            return render(request, "teams/invitation.html", {"gone": str(exc.message)}, status=404)
        except ServiceError as exc:
            context["error"] = str(exc.message)
            return render(request, "teams/invitation.html", context, status=exc.status)
        messages.success(request, _("You joined %(team)s.") % {"team": joined.team.name})
        return redirect("teams:detail", joined.team.slug)
    return render(request, "teams/invitation.html", context)


@login_required
@require_POST
def switch(request):
    """Work in a team (``team`` = its short name) or personally (empty) from now on in this session; back to
    ``next`` when it is a page of this site, else to the instances."""
    slug = request.POST.get("team", "").strip()
    try:
        now = context.switch(request, slug)
    except NotFound as exc:
        raise Http404(str(exc.message)) from exc
    if now.team:
        messages.success(
            request,
            _("You are working in %(team)s: lists show its resources, its wallet pays.") % {"team": now.team.name},
        )
    else:
        messages.success(request, _("You are working on your own account."))
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        target = reverse("instances:list")
    return redirect(target)
