"""Teams: create one, invite people by e-mail, accept, change roles, remove members, leave.

Every function takes the acting user's :class:`Membership` (from :func:`membership`, which answers 404 to anyone
outside the team) and checks the role against :mod:`teams.roles` before it changes anything. Each change writes a
row of the team's audit log in the same transaction.
"""

import logging
import re
import uuid
from datetime import timedelta

from allauth.account.models import EmailAddress
from django.conf import settings
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.db.models import Count
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from accounts import identity
from accounts.account_adapter import email_subject
from core.errors import Conflict, Forbidden, NotFound, ServiceError
from core.field_errors import FieldError

from . import accounts, budgets, roles
from .models import Invitation, Membership, Team, TeamEvent
from .roles import Role
from .signals import operate_lost

log = logging.getLogger(__name__)
SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$")
SLUG_AS_TYPED = r"^[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,38}[a-zA-Z0-9])?$"  # the API's pattern: clean_slug lower-cases
MAX_TEAMS_PER_USER = 20
MAX_OPEN_INVITATIONS = 100
INVITATION_SALT = "teams.invitation"
RESERVED_SLUGS = frozenset({"invitations", "new", "personal", "switch"})  # words the team pages' addresses use


def invitation_days() -> int:
    return int(getattr(settings, "TEAM_INVITATION_DAYS", 7))


def _has_verified_email(user, email: str | None = None) -> bool:
    addresses = EmailAddress.objects.filter(user=user, verified=True)
    if email is not None:
        addresses = addresses.filter(email__iexact=email)
    return addresses.exists()


def _log(team, actor, action, subject="", detail="") -> None:
    TeamEvent.objects.create(team=team, actor=actor, action=action, subject=subject, detail=str(detail))


# Reading ------------------------------------------------------------------------------------------------------


def teams_of(user):
    """The user's memberships, each with its team and the team's member count, by team name."""
    return (
        Membership.objects.filter(user=user)
        .select_related("team")
        .annotate(members=Count("team__memberships"))
        .order_by("team__name", "team__id")
    )


def membership(user, slug: str) -> Membership:
    """The user's membership of the team ``slug``; NotFound for a team they are not in (or that does not exist):
    a stranger cannot tell the two apart."""
    found = (
        Membership.objects.select_related("team").filter(user=user, team__slug=slug).first()
        if user.is_authenticated
        else None
    )
    if found is None:
        raise NotFound(_("No such team."))
    return found


def _locked(member: Membership) -> Membership:
    """Lock the team (one change of its members or invitations at a time) and read the actor's membership again
    under the lock: a request already on its way when its sender was demoted or removed acts with what is true now.
    Call inside a transaction."""
    Team.objects.select_for_update().get(pk=member.team_id)
    fresh = Membership.objects.select_related("team", "user").filter(pk=member.pk).first()
    if fresh is None:
        raise NotFound(_("No such team."))
    return fresh


def require(member: Membership, permission: str) -> None:
    if not roles.can(member.role, permission):
        raise Forbidden(
            _("Your role in %(team)s (%(role)s) does not allow this.")
            % {"team": member.team.name, "role": member.get_role_display()}
        )


def open_invitations_for(user):
    """Invitations waiting for any of the user's verified addresses."""
    addresses = list(EmailAddress.objects.filter(user=user, verified=True).values_list("email", flat=True))
    if not addresses:
        return Invitation.objects.none()
    query = Invitation.objects.none()
    for address in addresses:
        query = query | Invitation.objects.filter(email__iexact=address)
    return query.filter(
        accepted_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now()
    ).select_related("team", "invited_by")


# Creating a team ----------------------------------------------------------------------------------------------


def clean_slug(slug: str) -> str:
    slug = (slug or "").strip().lower()
    if slug in RESERVED_SLUGS:
        # Taken by the console's own team pages: a conflict, as a slug another team holds.
        raise FieldError(
            "slug", _("“%(slug)s” is reserved; choose another.") % {"slug": slug}, code="invalid_slug", status=409
        )
    if not SLUG.match(slug):
        raise FieldError(
            "slug",
            _("Use 1–40 lower-case letters, digits and hyphens, starting and ending with a letter or digit."),
            code="invalid_slug",
        )
    return slug


def clean_team_name(name) -> str:
    name = (name or "").strip()
    if not name or len(name) > 80 or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise FieldError("name", _("Give the team a name of 1–80 characters, on one line."), code="invalid_name")
    return name


def create_team(user, *, name: str, slug: str) -> Team:
    """A new team with ``user`` as its owner. Only a user with a verified e-mail address may create one."""
    name = clean_team_name(name)
    slug = clean_slug(slug)
    if not _has_verified_email(user):
        raise Forbidden(_("Verify your e-mail address before you create a team."), code="unverified")
    identity.require(user, "team")
    if Membership.objects.filter(user=user, role=Role.OWNER).count() >= MAX_TEAMS_PER_USER:
        raise Conflict(
            _("You own %(n)s teams, the most one person may own.") % {"n": MAX_TEAMS_PER_USER}, code="too_many_teams"
        )
    try:
        with transaction.atomic():
            team = Team.objects.create(name=name, slug=slug, created_by=user, account=accounts.new_account())
            Membership.objects.create(team=team, user=user, role=Role.OWNER)
            _log(team, user, TeamEvent.Action.CREATED)
    except IntegrityError as exc:
        raise FieldError(
            "slug",
            _("The short name “%(slug)s” is taken; choose another.") % {"slug": slug},
            code="slug_taken",
            status=409,
        ) from exc
    return team


# Invitations --------------------------------------------------------------------------------------------------


def invitation_token(invitation: Invitation) -> str:
    return signing.dumps(str(invitation.public_id), salt=INVITATION_SALT)


def invitation_url(invitation: Invitation) -> str:
    return settings.SITE_URL.rstrip("/") + reverse("teams:invitation", args=[invitation_token(invitation)])


def _check_role(member: Membership, role: str) -> str:
    if role not in Role.values:
        raise FieldError("role", _("Choose one of the roles."), code="invalid_role")
    if role == Role.OWNER:
        require(member, roles.OWN)
    return role


def invite(member: Membership, email: str, role: str) -> Invitation:
    """Invite ``email`` to the team with ``role`` and e-mail them a link. Inviting an address again renews its
    invitation (a new link, a new expiry, the new role)."""
    require(member, roles.MEMBERS)

    email = (email or "").strip()
    try:
        validate_email(email)
    except ValidationError as exc:
        raise FieldError("email", _("Enter a valid e-mail address."), code="invalid_email") from exc
    if role not in Role.values:
        raise FieldError("role", _("Choose one of the roles."), code="invalid_role")
    now = timezone.now()
    with transaction.atomic():
        member = _locked(member)
        require(member, roles.MEMBERS)
        role = _check_role(member, role)
        team = member.team
        if team.memberships.filter(user__email__iexact=email).exists():
            raise Conflict(_("%(email)s is already a member of %(team)s.") % {"email": email, "team": team.name})
        open_ones = team.invitations.filter(accepted_at__isnull=True, revoked_at__isnull=True)
        open_ones.filter(email__iexact=email).update(revoked_at=now)
        if open_ones.filter(expires_at__gt=now).count() >= MAX_OPEN_INVITATIONS:
            raise ServiceError(
                _("%(team)s has %(n)s open invitations, the most it may have; withdraw some first.")
                % {"team": team.name, "n": MAX_OPEN_INVITATIONS},
                code="too_many_invitations",
            )
        invitation = Invitation.objects.create(
            team=team,
            email=email.lower(),
            role=role,
            invited_by=member.user,
            expires_at=now + timedelta(days=invitation_days()),
        )
        _log(team, member.user, TeamEvent.Action.INVITED, subject=invitation.email, detail=role)
        transaction.on_commit(lambda: _send_invitation(invitation))
    return invitation


def _send_invitation(invitation: Invitation) -> None:
    with translation.override(settings.LANGUAGE_CODE):
        subject = email_subject(_("Join %(team)s") % {"team": invitation.team.name})
        body = _(
            "%(inviter)s invites you to the team %(team)s as %(role)s.\n\n"
            "Open this link to join (it works until %(expires)s; if you have no account yet, sign up with this "
            "address first):\n%(url)s\n"
        ) % {
            "inviter": invitation.invited_by.email if invitation.invited_by else "",
            "team": invitation.team.name,
            "role": invitation.get_role_display(),
            "expires": timezone.localtime(invitation.expires_at).strftime("%Y-%m-%d %H:%M"),
            "url": invitation_url(invitation),
        }
    try:
        send_mail(subject, body, None, [invitation.email])
    except Exception:  # the invitation stands (inviting again sends it again); a mail server's failure is logged
        log.exception("the invitation to %s could not be e-mailed", invitation.email)


def read_invitation(token: str) -> Invitation:
    """The open invitation a link carries; NotFound, with the reason, for a forged, expired, used or withdrawn one."""
    gone = _("This invitation link is not valid: it has expired, was withdrawn or was already used.")
    try:
        public_id = signing.loads(token, salt=INVITATION_SALT, max_age=timedelta(days=invitation_days()))
    except signing.BadSignature as exc:
        raise NotFound(gone, code="invitation_invalid") from exc
    invitation = Invitation.objects.select_related("team", "invited_by").filter(public_id=public_id).first()
    if invitation is None or not invitation.is_open:
        raise NotFound(gone, code="invitation_invalid")
    return invitation


def accept(user, token: str) -> Membership:
    """Join the team an invitation is for. Only the invited address may accept, once it is verified on the
    account: a forwarded link lets nobody else in."""
    invitation = read_invitation(token)
    if not _has_verified_email(user, invitation.email):
        raise Forbidden(
            _("This invitation was sent to %(email)s. Sign in with that address (or add and verify it) to join.")
            % {"email": invitation.email},
            code="invitation_other_address",
        )
    with transaction.atomic():
        locked = Invitation.objects.select_for_update().get(pk=invitation.pk)
        if locked.accepted_at is not None or locked.revoked_at is not None:
            raise NotFound(_("This invitation was already used or withdrawn."), code="invitation_invalid")
        joined, created = Membership.objects.get_or_create(
            team=invitation.team, user=user, defaults={"role": invitation.role}
        )
        locked.accepted_at, locked.accepted_by = timezone.now(), user
        locked.save(update_fields=["accepted_at", "accepted_by"])
        if created:
            _log(invitation.team, user, TeamEvent.Action.JOINED, detail=invitation.role)
    return joined


def revoke_invitation(member: Membership, public_id) -> None:
    require(member, roles.MEMBERS)
    with transaction.atomic():
        member = _locked(member)
        require(member, roles.MEMBERS)
        invitation = member.team.invitations.filter(public_id=public_id, accepted_at__isnull=True).first()
        if invitation is None or invitation.revoked_at is not None:
            raise NotFound(_("No such open invitation."))
        invitation.revoked_at = timezone.now()
        invitation.save(update_fields=["revoked_at"])
        _log(member.team, member.user, TeamEvent.Action.INVITATION_REVOKED, subject=invitation.email)


# Members ------------------------------------------------------------------------------------------------------


def _other(member: Membership, user_public_id) -> Membership:
    other = (
        member.team.memberships.select_related("user").filter(user__public_id=user_public_id).first()
        if _is_uuid(user_public_id)
        else None
    )
    if other is None:
        raise NotFound(_("No such member."))
    return other


def _is_uuid(value) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


def is_self(user, user_public_id) -> bool:
    return _is_uuid(user_public_id) and uuid.UUID(str(user_public_id)) == user.public_id


def _owners_left(team, without: Membership) -> int:
    return team.memberships.filter(role=Role.OWNER).exclude(pk=without.pk).count()


def change_role(member: Membership, user_public_id, role: str) -> Membership:
    """Give a member another role. Making or unmaking an owner takes an owner; the last owner stays one."""
    require(member, roles.MEMBERS)
    role = _check_role(member, role)
    with transaction.atomic():
        member = _locked(member)  # two owners demoting each other: one at a time, each with the role it has now
        require(member, roles.MEMBERS)
        role = _check_role(member, role)
        other = _other(member, user_public_id)
        if other.role == Role.OWNER and role != Role.OWNER:
            require(member, roles.OWN)
            if _owners_left(member.team, other) == 0:
                raise Conflict(_("A team needs an owner: make someone else owner first."), code="last_owner")
        if other.role != role:
            could = roles.can(other.role, roles.OPERATE)
            other.role = role
            other.save(update_fields=["role"])
            _log(member.team, member.user, TeamEvent.Action.ROLE_CHANGED, subject=other.user.email, detail=role)
            if could and not roles.can(role, roles.OPERATE):
                operate_lost.send(sender=Team, team=member.team, user=other.user)
    return other


def set_budget(member: Membership, user_public_id, value) -> Membership:
    """Set (or clear, with an empty value) a member's monthly budget: the billing permission."""
    require(member, roles.BILLING)
    amount = budgets.clean_budget(value)
    with transaction.atomic():
        member = _locked(member)
        require(member, roles.BILLING)
        other = _other(member, user_public_id)
        other.monthly_budget = amount
        # A new budget is a new limit: a stop already asked this period does not hold the next one back.
        other.budget_stop_period = other.budget_alerted_at = None
        other.save(update_fields=["monthly_budget", "budget_stop_period", "budget_alerted_at"])
        _log(
            member.team,
            member.user,
            TeamEvent.Action.BUDGET_CHANGED,
            subject=other.user.email,
            detail="—" if amount is None else f"¥{amount}",
        )
    return other


def remove_member(member: Membership, user_public_id) -> None:
    """Remove a member (or, with their own id, leave). They lose access at once; what the team owns stays."""
    leaving = is_self(member.user, user_public_id)
    if not leaving:
        require(member, roles.MEMBERS)
    with transaction.atomic():
        member = _locked(member)
        if not leaving:
            require(member, roles.MEMBERS)
        other = _other(member, user_public_id)
        if other.role == Role.OWNER:
            if not leaving:
                require(member, roles.OWN)
            if _owners_left(member.team, other) == 0:
                raise Conflict(_("A team needs an owner: make someone else owner first."), code="last_owner")
        other.delete()
        operate_lost.send(sender=Team, team=member.team, user=other.user)
        if leaving:
            _log(member.team, member.user, TeamEvent.Action.LEFT)
        else:
            _log(member.team, member.user, TeamEvent.Action.REMOVED, subject=other.user.email)


def events(member: Membership, limit: int = 50):
    require(member, roles.MEMBERS)
    return member.team.events.select_related("actor")[:limit]


# What members do with the team's resources --------------------------------------------------------------------


def record(resource, actor, action: str, subject: str = "", detail: str = "") -> None:
    """Write ``actor``'s ``action`` on ``resource`` (anything with an ``owner``, or the owning account itself) into
    the team's audit log when a team owns it; nothing, and no query, for one's own."""
    owner_id = getattr(resource, "owner_id", getattr(resource, "pk", None))
    if owner_id == actor.pk:
        return
    account = getattr(resource, "owner", resource)
    team = accounts.team_of(account)
    if team is not None:
        _log(team, actor, action, subject=subject, detail=detail)


def team_for_token(user, slug) -> Team | None:
    """The team an API token is to be issued for (None for a personal one): one the person belongs to."""
    if slug in (None, ""):
        return None
    if not isinstance(slug, str):
        raise FieldError("team", _("Choose yourself or one of your teams."), code="invalid_team")
    try:
        return membership(user, slug.strip()).team
    except NotFound as exc:  # no such team, or not one of theirs: a 404 like any other reference to it
        raise FieldError("team", _("Choose yourself or one of your teams."), code="invalid_team", status=404) from exc
