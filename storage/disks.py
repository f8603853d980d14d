"""Cloud disks (云硬盘) — the only writers of disks and their events.

Pages, the API, the CLI (through the API), the admin and tasks all call these functions; every lookup goes
through ``for_user``, so someone else's disk is as absent as a disk that never existed.

Attaching is a compare-and-set on the disk row (``available`` → ``attaching``, with the instance) inside one
database transaction that also locks the instance row: on PostgreSQL a second attempt waits for the first to
commit and then finds the disk no longer available, on SQLite writers are serialised. Either way exactly one of
two concurrent attaches wins and the other is told the disk is in use. The backend call (hot-plug on a running
instance) happens inside that transaction, so a refusal leaves the disk as it was.

Billing: a disk is metered per GB-day from creation to deletion through ``billing.metering`` (kind ``disk``),
at the price ``billing.quote.quote_disk`` gives — the one place that prices disks. Growing a disk closes its
session at the next whole minute and opens one at the new size from that minute, so no minute is billed twice.
"""

import logging
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q, Sum
from django.utils import timezone
from django.utils.translation import gettext as _

from billing import budgets, metering, wallet
from billing.arrears import notify, retention_days
from billing.choices import AccountKind, NotificationKind
from billing.models import Account, UsageSession
from billing.money import to_cents
from billing.quote import StorageQuote, quote_disk, storage_price
from billing.rules import billed_through
from catalog.models import Node, Zone
from core.attaching import machines
from core.errors import Conflict, NotFound, ServiceError
from core.validators import clean_display_name
from teams.access import refuse_if_seen

from .choices import DiskReason, DiskStatus
from .models import CloudDisk, DiskEvent

log = logging.getLogger(__name__)

MIN_GB = 1
MAX_GB = 32 * 1024  # 32 TB
USAGE_KIND = "disk"

# Which instances take a disk now, and whether the backend gets it at once, instances answer
# (``instances.machines``): a running instance gets a hot-plug (a refusal undoes the change); a stopped, preempted
# or failed one has its layout updated where the backend keeps one, and the start re-applies every attached disk
# anyway. Stopping and releasing instances refuse: the first is on its way down, the second gives its disks back.


# Lookups ---------------------------------------------------------------------------------------------------------


def user_disks(user, action: str = "view"):
    """The disks (not deleted) ``user`` may ``action``: their own and their teams' (by role), newest first, with
    their zone and instance: two joins, one query."""
    return CloudDisk.objects.for_user(user, action).live().select_related("zone", "instance")


def account_disks(account):
    """One account's disks (a person's, or a team's for its context; or its id): the disks page and the API's
    list."""
    return CloudDisk.objects.filter(owner=account).live().select_related("zone", "instance")


def get_disk(user, public_id, action: str = "view") -> CloudDisk:
    try:
        key = uuid.UUID(str(public_id))
    except ValueError:
        key = None
    disk = user_disks(user, action).filter(public_id=key).first() if key else None
    if disk is None:
        if key:  # a team member whose role may only see the disk is told so
            refuse_if_seen(user, CloudDisk.objects.live(), action, public_id=key)
        raise NotFound(_("No such disk."))
    return disk


def attachable_instances(user, disk: CloudDisk):
    """The user's instances in the disk's zone that may take a disk now (the page's attach menu)."""
    return machines().attachable(disk.owner_id, [disk.zone_id], user=user)


# Creating, growing, deleting -------------------------------------------------------------------------------------


def clean_size(size_gb) -> int:
    if isinstance(size_gb, bool):
        size_gb = None
    try:
        size = int(str(size_gb).strip())
    except (TypeError, ValueError):
        size = None
    if size is None or not MIN_GB <= size <= MAX_GB:
        raise ServiceError(
            _("A disk's size is a whole number of GB from %(min)s to %(max)s.") % {"min": MIN_GB, "max": MAX_GB},
            code="invalid_size",
        )
    return size


def clean_name(name) -> str:
    name = clean_display_name(name, max_length=64, field_label=_("disk"))
    if "/" in name or name in {".", ".."}:
        raise ServiceError(_("Give the disk a name of 1 to 64 characters without “/”."), code="invalid_name")
    return name


def _event(disk: CloudDisk, old: str, new: str, reason: str, *, detail: str = "", at=None, data=None) -> None:
    DiskEvent.objects.create(
        disk=disk, old=old, new=new, reason=reason, detail=detail[:255], data=data or {}, at=at or timezone.now()
    )


def _label(disk: CloudDisk) -> str:
    return f"{disk.name} ({disk.size_gb} GB)"


def _open_usage(disk: CloudDisk, price: StorageQuote, started_at, member_id=None) -> None:
    metering.open_usage(
        user=disk.owner,
        kind=USAGE_KIND,
        resource_id=disk.public_id,
        quote=price,
        started_at=started_at,
        label=_label(disk),
        member_id=member_id,
    )


def price_of(size_gb: int, zone: Zone | None = None, price=None) -> StorageQuote:
    return quote_disk(clean_size(size_gb), zone=zone, price=price)


def prices_for(disks_) -> dict[int, StorageQuote]:
    """size → quote for a list of disks, reading the price row once."""
    if not disks_:
        return {}
    price = storage_price("disk")
    return {size: quote_disk(size, price=price) for size in {d.size_gb for d in disks_}}


def _check_limits(user, *, adding: int, grow_gb: int) -> None:
    """The operator's per-user limits: how many disks, and how many GB in all (``DISK_MAX_PER_USER``,
    ``DISK_MAX_TOTAL_GB``)."""
    live = CloudDisk.objects.live().filter(owner=user)
    count, total = live.count(), live.aggregate(total=Sum("size_gb"))["total"] or 0
    if adding and count + adding > settings.DISK_MAX_PER_USER:
        raise ServiceError(
            _("You have %(count)s cloud disks, the most one account may have: delete one first.") % {"count": count},
            code="disk_limit",
        )
    if total + grow_gb > settings.DISK_MAX_TOTAL_GB:
        raise ServiceError(
            _("Your cloud disks may hold %(max)s GB in all; you have %(total)s GB, so at most %(left)s GB more.")
            % {"max": settings.DISK_MAX_TOTAL_GB, "total": total, "left": max(settings.DISK_MAX_TOTAL_GB - total, 0)},
            code="disk_limit",
        )


def _require_funds(user, per_hour, *, launching=None, by=None) -> None:
    """Billing's funds gate for one more hour of disk (cash only). A disk created with its instance (the launch
    wizard) counts that instance's first hour too: neither is billed yet, and together they must fit. On a team's
    wallet, ``by`` (the member) must also have that hour left of their monthly budget."""
    pending = launching.price_per_hour or 0 if launching is not None and machines().is_launching(launching) else 0
    # The exact hourly price, not rounded to the fen: a small disk's hour (¥0.002083) would read "needs ¥0.00".
    wallet.require_funds(user, per_hour, compute=False, pending_per_hour=pending)
    if by is not None and launching is None:  # the launch checked the member's budget for both
        budgets.check_launch(user.pk, by, to_cents(per_hour))


def _member(account, by) -> int | None:
    """Whose budget a team's disk spends: the member acting (None on a person's own wallet)."""
    member_id = getattr(by, "pk", by)
    return member_id if member_id is not None and member_id != account.pk else None


def create(user, *, name, size_gb, zone: Zone, instance=None, by=None) -> CloudDisk:
    """Create a disk of ``user`` (a person, or a team's account) in ``zone`` and start metering it; with
    ``instance`` (the launch wizard), attach it too. ``by``: the member creating a team's disk, whose monthly
    budget it spends. Refused when the owner cannot pay its first hour on top of what already runs, when the
    member's budget cannot, or over the disk limits."""
    name, size = clean_name(name), clean_size(size_gb)
    price = quote_disk(size, zone=zone)
    now = timezone.now()
    # A data disk made with a team's instance is the launching member's spend, as the instance is.
    member_id = _member(user, instance.launched_by_id if instance is not None else by)
    try:
        with transaction.atomic():
            _require_funds(user, price.payable_per_hour, launching=instance, by=member_id)
            _check_limits(user, adding=1, grow_gb=size)
            disk = CloudDisk.objects.create(owner=user, name=name, size_gb=size, zone=zone)
            _event(
                disk,
                "",
                DiskStatus.AVAILABLE,
                DiskReason.CREATED,
                detail=f"{size} GB",
                at=now,
                data={"per_gb_day": str(price.per_gb_day)},
            )
            _open_usage(disk, price, now, member_id=member_id)
            if instance is not None:
                attach(user, disk.public_id, instance.public_id)
                disk.refresh_from_db()
    except IntegrityError as exc:
        raise Conflict(_("You already have a disk named “%(name)s”.") % {"name": name}, code="exists") from exc
    return disk


def grow(user, public_id, size_gb) -> CloudDisk:
    """Grow a disk to ``size_gb`` GB (never shrink): billed at the new size from the next whole minute."""
    size = clean_size(size_gb)
    with transaction.atomic():
        # The wallet first, then the disk: the one lock order (a launch locks the wallet before its disks).
        current = get_disk(user, public_id, "change")
        account, member_id = current.owner, _member(current.owner, user)
        if size > current.size_gb:
            new_per_hour = quote_disk(size, zone=current.zone).payable_per_hour
            extra = new_per_hour - quote_disk(current.size_gb, zone=current.zone).payable_per_hour
            wallet.require_funds(account, extra, compute=False)
            if member_id is not None:
                # On a team's wallet the member who grows the disk pays for all of it from now on, from their
                # monthly budget (the next session below is theirs).
                budgets.check_launch(account.pk, member_id, to_cents(new_per_hour))
            _check_limits(account, adding=0, grow_gb=size - current.size_gb)
        disk = _locked(user, public_id)
        if size <= disk.size_gb:
            raise ServiceError(
                _("A disk only grows: “%(name)s” has %(size)s GB; give a larger size.")
                % {"name": disk.name, "size": disk.size_gb},
                code="grow_only",
            )
        old_size, now = disk.size_gb, timezone.now()
        price = quote_disk(size, zone=disk.zone)
        session = UsageSession.objects.open().filter(resource_id=disk.public_id).first()
        resume_at = billed_through(session.started_at, now) if session else now
        CloudDisk.objects.filter(pk=disk.pk).update(size_gb=size, updated_at=now)
        disk.size_gb = size
        if session is not None:
            metering.close_usage(resource_id=disk.public_id, ended_at=resume_at)
        _open_usage(disk, price, resume_at, member_id=member_id)
        _event(
            disk,
            disk.status,
            disk.status,
            DiskReason.GROWN,
            detail=f"{old_size} GB → {size} GB",
            at=now,
            data={"from": old_size, "to": size, "per_gb_day": str(price.per_gb_day)},
        )
        if disk.status == DiskStatus.ATTACHED and disk.instance_id is not None:
            # The machine's file system grows with it (a running one at once; a refusal undoes the grow).
            instance = machines().by_pk(disk.instance_id)
            machines().backend_call(
                instance,
                lambda backend: backend.attach_disk(instance, str(disk.public_id), size, name=disk.name),
                "disk grow",
            )
    return disk


def delete(user, public_id) -> CloudDisk:
    """Delete a detached disk: its data is gone and billing stops now."""
    with transaction.atomic():
        disk = _locked(user, public_id)
        if disk.status != DiskStatus.AVAILABLE:
            raise Conflict(
                _("Disk “%(name)s” is attached to an instance: detach it before deleting it.") % {"name": disk.name},
                code="disk_in_use",
            )
        _delete_locked(disk, DiskReason.DELETED)
    return disk


def _delete_locked(disk: CloudDisk, reason: str, at=None) -> None:
    """Delete the locked, detached ``disk``: its data is gone and billing stops at ``at`` (default: now)."""
    at = at or timezone.now()
    _move(disk, DiskStatus.AVAILABLE, DiskStatus.DELETED, reason, at=at, deleted_at=at)
    metering.close_usage(resource_id=disk.public_id, ended_at=at)
    transaction.on_commit(lambda: _erase(disk))


def _erase(disk: CloudDisk) -> None:
    """The deleted disk's bytes go from the backends of its zone (after the commit: a rolled-back delete keeps
    them). A backend that cannot is logged; the disk is deleted for the user and billing either way."""
    names = set(Node.objects.filter(zone_id=disk.zone_id).values_list("backend_name", flat=True))
    for name in sorted(names):
        try:
            machines().erase_disk(name, str(disk.public_id))
        except Exception:  # noqa: BLE001 - a backend's failure must not undo what the user already saw done
            log.exception("backend %s could not erase deleted disk %s", name, disk.public_id)


def _locked(user, public_id) -> CloudDisk:
    """The caller's disk, locked for the rest of the transaction (PostgreSQL; SQLite serialises writers)."""
    disk = get_disk(user, public_id, "change")
    return CloudDisk.objects.select_for_update().select_related("zone", "owner").get(pk=disk.pk)


def _move(disk: CloudDisk, old: str, new: str, reason: str, *, detail="", at=None, **changes) -> None:
    """Compare-and-set ``old`` → ``new`` on the disk row with ``changes``, and write the event."""
    at = at or timezone.now()
    if not CloudDisk.objects.filter(pk=disk.pk, status=old).update(status=new, updated_at=at, **changes):
        raise _in_use(disk)
    for name, value in {"status": new, **changes}.items():
        setattr(disk, name, value)
    _event(disk, old, new, reason, detail=detail, at=at)


def _in_use(disk: CloudDisk) -> Conflict:
    return Conflict(
        _("Disk “%(name)s” changed meanwhile or is in use by another instance; reload and try again.")
        % {"name": disk.name},
        code="disk_in_use",
    )


# Attaching and detaching -----------------------------------------------------------------------------------------


def _instance_for(user, instance_id):
    instance = machines().get(user, instance_id, "change")
    # Lock the instance row too (after the disk: one fixed order), so a release cannot slip in between.
    return machines().lock(instance.pk)


def attach(user, disk_id, instance_id) -> CloudDisk:
    """Attach the caller's disk to the caller's instance in the same zone: hot-plug when it runs, at its next
    start when it is stopped. A disk is attached to one instance at a time."""
    with transaction.atomic():
        disk = _locked(user, disk_id)
        instance = _instance_for(user, instance_id)
        if disk.owner_id != instance.owner_id:
            # A person's disk and a team's instance (or the other way): whoever pays for the disk must own the
            # machine that reads it, and keep it when they leave the team.
            raise ServiceError(
                _(
                    "Disk “%(disk)s” and instance “%(instance)s” belong to different accounts: a disk attaches only "
                    "to instances of its own account."
                )
                % {"disk": disk.name, "instance": instance.name},
                code="other_account",
            )
        if disk.zone_id != instance.zone_id:
            raise ServiceError(
                _(
                    "Disk “%(disk)s” is in %(disk_zone)s and instance “%(instance)s” in %(zone)s: a disk attaches only "
                    "to instances of its own zone."
                )
                % {
                    "disk": disk.name,
                    "disk_zone": disk.zone.label,
                    "instance": instance.name,
                    "zone": instance.zone.label,
                },
                code="other_zone",
            )
        if disk.instance_id == instance.pk and disk.status == DiskStatus.ATTACHED:
            return disk  # already there: a retried request
        if disk.status != DiskStatus.AVAILABLE:
            raise _in_use(disk)
        _check_instance(instance)
        _move(
            disk,
            DiskStatus.AVAILABLE,
            DiskStatus.ATTACHING,
            DiskReason.ATTACH_REQUESTED,
            detail=instance.name,
            instance=instance,
        )
        machines().backend_call(
            instance,
            lambda backend: backend.attach_disk(instance, str(disk.public_id), disk.size_gb, name=disk.name),
            "disk attach",
        )
        hot = machines().is_running(instance)
        detail = instance.name if hot else _("%(name)s (at its next start)") % {"name": instance.name}
        _move(disk, DiskStatus.ATTACHING, DiskStatus.ATTACHED, DiskReason.ATTACHED, detail=detail)
    return disk


def _check_instance(instance) -> None:
    if not machines().may_attach(instance):
        raise Conflict(
            _("Instance “%(name)s” is %(status)s: disks attach to running, starting or stopped instances.")
            % {"name": instance.name, "status": instance.get_status_display().lower()},
            code="invalid_transition",
        )


def detach(user, public_id) -> CloudDisk:
    """Detach a disk from its instance: hot-unplug when it runs. The data stays on the disk."""
    with transaction.atomic():
        disk = _locked(user, public_id)
        if disk.status == DiskStatus.AVAILABLE:
            return disk  # already detached: a retried request
        if disk.status != DiskStatus.ATTACHED:
            raise _in_use(disk)
        instance = machines().lock(disk.instance_id)
        if not machines().may_attach(instance):
            raise Conflict(
                _("Instance “%(name)s” is %(status)s: wait until it has stopped or been released.")
                % {"name": instance.name, "status": instance.get_status_display().lower()},
                code="invalid_transition",
            )
        _detach_locked(disk, instance)
    return disk


def _detach_locked(disk: CloudDisk, instance, at=None) -> None:
    """Detach the locked, attached ``disk`` from its locked ``instance``: hot-unplug when it runs (a refusal
    undoes the change), at its next start otherwise. The caller has checked that the instance may change."""
    at = at or timezone.now()
    _move(disk, DiskStatus.ATTACHED, DiskStatus.DETACHING, DiskReason.DETACH_REQUESTED, detail=instance.name, at=at)
    machines().backend_call(instance, lambda backend: backend.detach_disk(instance, str(disk.public_id)), "disk detach")
    _move(
        disk,
        DiskStatus.DETACHING,
        DiskStatus.AVAILABLE,
        DiskReason.DETACHED,
        detail=instance.name,
        at=at,
        instance=None,
    )


def release_from(instance) -> int:
    """The instance is being released: give its disks back (detached, data kept). Returns how many."""
    released = 0
    for disk in CloudDisk.objects.select_for_update().filter(instance=instance).order_by("pk"):
        CloudDisk.objects.filter(pk=disk.pk).update(
            status=DiskStatus.AVAILABLE, instance=None, updated_at=timezone.now()
        )
        _event(disk, disk.status, DiskStatus.AVAILABLE, DiskReason.INSTANCE_RELEASED, detail=instance.name)
        released += 1
    return released


def _attached_to(instance) -> Q:
    return Q(instance=instance, status=DiskStatus.ATTACHED)


def attached_to(instance):
    return CloudDisk.objects.filter(_attached_to(instance)).order_by("name")


def panel_disks(instance) -> tuple[list[CloudDisk], list[CloudDisk]]:
    """(the disks attached to ``instance``, by name; its owner's disks free to attach in its zone, newest first), in
    one query."""
    # The panel names each disk by its own columns: its zone and instance are the page's, read once already.
    rows = list(
        CloudDisk.objects.filter(  # newest first: the model's order
            Q(instance_id=instance.pk, status=DiskStatus.ATTACHED)
            | Q(owner_id=instance.owner_id, zone_id=instance.zone_id, status=DiskStatus.AVAILABLE)
        )
    )
    attached = sorted((disk for disk in rows if disk.status == DiskStatus.ATTACHED), key=lambda disk: disk.name)
    return attached, [disk for disk in rows if disk.status == DiskStatus.AVAILABLE]


# Arrears: disks are kept for the retention period ------------------------------------------------------------------


def note_arrears(user_ids_in_arrears, now=None) -> int:
    """Mark the live disks of users in arrears (once) with a notice naming the day until which they are kept,
    and clear the mark when the balance recovers. Returns how many disks changed.

    Billing's own arrears notice tells the user that disks and storage are kept for the retention period; these
    events put the date on each disk's timeline. ``expire_arrears`` sends the reminders and deletes the disks
    whose owners are still in arrears when it ends.
    """
    now = now or timezone.now()
    keep_until = now + timedelta(days=retention_days())
    changed = 0
    newly = CloudDisk.objects.live().filter(owner_id__in=user_ids_in_arrears, arrears_since__isnull=True)
    for disk in newly:
        if CloudDisk.objects.filter(pk=disk.pk, arrears_since__isnull=True).update(arrears_since=now):
            detail = _("kept until %(date)s") % {"date": keep_until.date().isoformat()}
            _event(disk, disk.status, disk.status, DiskReason.ARREARS_NOTICE, detail=detail, at=now)
            changed += 1
    recovered = CloudDisk.objects.live().filter(arrears_since__isnull=False).exclude(owner_id__in=user_ids_in_arrears)
    for disk in recovered:
        if CloudDisk.objects.filter(pk=disk.pk, arrears_since__isnull=False).update(
            arrears_since=None, arrears_reminders_sent=0
        ):
            _event(disk, disk.status, disk.status, DiskReason.ARREARS_CLEARED, at=now)
            changed += 1
    return changed


# Days before the end of the retention period on which the owner is reminded (once each).
ARREARS_REMINDER_DAYS = (3, 1)


def expire_arrears(now=None) -> dict:
    """The end of the retention period for disks whose owners stay in arrears (SPEC §5): a reminder 3 days and
    1 day before (a billing notification, e-mailed, and an event on the disk), then deletion — detached first
    from a stopped instance. A disk attached to a running instance (a prepaid term still running) is kept and
    logged for the operator. Runs after ``note_arrears`` has cleared the marks of owners who topped up."""
    now = now or timezone.now()
    keep = timedelta(days=retention_days())
    reminded = deleted = kept = 0
    marked = CloudDisk.objects.live().filter(arrears_since__isnull=False).order_by("pk")
    for disk in marked.filter(arrears_since__gt=now - keep, arrears_reminders_sent__lt=len(ARREARS_REMINDER_DAYS)):
        left = disk.arrears_since + keep - now
        due = sum(1 for days in ARREARS_REMINDER_DAYS if left <= timedelta(days=days))
        if due > disk.arrears_reminders_sent and _remind(disk, due, now):
            reminded += 1
    for disk in marked.filter(arrears_since__lte=now - keep):
        outcome = _delete_for_arrears(disk.pk, now)
        deleted += outcome == "deleted"
        kept += outcome == "kept"
    return {"reminded": reminded, "deleted": deleted, "kept_on_running_instances": kept}


def _remind(disk: CloudDisk, due: int, now) -> bool:
    with transaction.atomic():
        # Compare-and-set on the counter: one reminder per threshold, however many beats run.
        if not CloudDisk.objects.filter(pk=disk.pk, arrears_reminders_sent__lt=due).update(arrears_reminders_sent=due):
            return False
        date = disk.kept_until.date().isoformat()
        _event(disk, disk.status, disk.status, DiskReason.ARREARS_REMINDER, detail=date, at=now)
        notify(disk.owner_id, NotificationKind.DISK_REMINDER, disk=disk.name, date=date)
    return True


def owners_in_arrears():
    """The ids of users who owe money, as a subquery: a negative cash balance (disks are paid from cash only)."""
    return Account.objects.filter(kind=AccountKind.USER_CASH, balance__lt=0, user__isnull=False).values("user_id")


def _in_arrears(user_id: int) -> bool:
    return owners_in_arrears().filter(user_id=user_id).exists()


def _delete_for_arrears(pk: int, now) -> str:
    with transaction.atomic():
        disk = CloudDisk.objects.select_for_update().select_related("zone").get(pk=pk)
        if disk.status == DiskStatus.DELETED or disk.arrears_since is None or not _in_arrears(disk.owner_id):
            return "skipped"  # deleted meanwhile, or the owner topped up since the mark
        if disk.status != DiskStatus.AVAILABLE:
            instance = machines().lock(disk.instance_id)
            if (
                disk.status != DiskStatus.ATTACHED
                or machines().is_running(instance)
                or not machines().may_attach(instance)
            ):
                log.warning(
                    "disk %s in arrears past retention is kept: %s on %s (%s)",
                    disk.public_id,
                    disk.status,
                    instance.public_id,
                    instance.status,
                )
                return "kept"
            _detach_locked(disk, instance, at=now)
        _delete_locked(disk, DiskReason.ARREARS_EXPIRED, at=now)
        notify(disk.owner_id, NotificationKind.DISK_DELETED, disk=disk.name, days=retention_days())
    return "deleted"
