"""Images imported from a container registry: the only writer of ``ImageImport`` rows and of the files they name.

``start_import`` checks the reference and the registry (or that the archive is a file in the owner's cloud
storage: a ``docker save`` tar or an OCI layout tar, told apart by their content), creates a private image
(``importing``, one variant) with its import record, and enqueues the task on commit; ``run_import`` (the task's
work) copies the image into the shared OCI layout with skopeo (an archive from the worker's own copy of it, so the
file the user can still change is not what skopeo reads), reads its manifest and config (refused past their size
limits), unpacks it rootless with umoci, makes the files safe (``rootfs``), checks what they hold and marks the
image ready, or failed with the reason.
An imported image's size counts in its owner's storage (``storage.quota``, as the hub's published repositories do)
and the import is refused when it would pass the owner's ceiling.
"""

import logging

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.template.defaultfilters import filesizeformat
from django.utils import timezone
from django.utils.translation import gettext as _

from core import encryption, visitor_cache
from core.errors import Conflict, NotFound, ServiceError
from core.field_errors import FieldError
from instances.choices import TERMINAL, Backend
from instances.models import Instance, WaitingLaunch
from storage import quota
from storage import services as storage_services
from storage.choices import UsageSource

from ..choices import CPU_ONLY, ImageCategory, ImageReview, ImageStatus, ImportStep
from ..models import Image, ImageImport, ImageVariant
from ..signals import image_removal_asked
from . import oci, references, rootfs
from .services import VISITOR_PAGES, _clean_name, _event, _publisher_name, _unique_slug, reindex

log = logging.getLogger(__name__)

MAX_CREDENTIAL = 1000
COPY_CHUNK = 1024 * 1024
# What of an image's config the console keeps (the OCI image spec's names).
CONFIG_KEYS = {
    "Entrypoint": "entrypoint",
    "Cmd": "cmd",
    "Env": "env",
    "WorkingDir": "working_dir",
    "User": "user",
    "ExposedPorts": "exposed_ports",
}


class ImportFailed(ServiceError):
    """A permanent refusal of an import (the image is marked failed with this message)."""

    code = "import_failed"


def start_import(
    user,
    reference: str = "",
    *,
    archive: str = "",
    username: str = "",
    password: str = "",
    name: str = "",
    owner=None,
) -> Image:
    """Import the image ``reference`` names, or the ``docker save`` or OCI archive at the path ``archive`` in the
    owner's cloud storage, for ``owner`` (default ``user``; a team's account in a team's context): a private image
    that is ``importing`` until the task has copied, unpacked and checked it."""
    if not getattr(user, "is_authenticated", False):
        raise ServiceError(_("Log in to import images."), code="not_authenticated")
    owner = owner or user
    if bool(reference and reference.strip()) == bool(archive and archive.strip()):
        raise ServiceError(
            _("Give either an image reference or the path of an archive in your cloud storage."), code="invalid_source"
        )
    if archive:
        return _start(user, owner, archive=_archive_path(owner, archive), name=name)
    parsed = references.parse(reference)
    references.check_registry(parsed)
    username, password = (username or "").strip(), password or ""
    if len(username) > MAX_CREDENTIAL or len(password) > MAX_CREDENTIAL:
        raise ServiceError(_("The registry user or password is too long."), code="invalid_credentials")
    if password and not username:
        raise ServiceError(_("A password needs the registry user it belongs to."), code="invalid_credentials")
    return _start(user, owner, reference=parsed, username=username, password=password, name=name)


def _archive_path(owner, path: str) -> str:
    """The path of a file in ``owner``'s cloud storage (anyone else's files are not found, as a missing one)."""
    entry = storage_services.find(owner, path)
    if entry is None or entry.is_folder:
        raise Conflict(_("“%(path)s” is a folder, not an archive.") % {"path": path}, code="not_a_file")
    return entry.path


def _start(user, owner, *, reference=None, archive="", username="", password="", name="") -> Image:
    source = str(reference) if reference else archive
    default_name = reference.path.rsplit("/", 1)[-1] if reference else archive.rsplit("/", 1)[-1].split(".", 1)[0]
    name = _clean_name(name or default_name or "image")
    with transaction.atomic():
        image = Image.objects.create(
            slug=_unique_slug(name),
            name=name,
            summary=source[:300],
            publisher=_publisher_name(owner),
            owner=owner,
            category=ImageCategory.COMMUNITY,
            review_state=ImageReview.DRAFT,
            status=ImageStatus.IMPORTING,
        )
        ImageImport.objects.create(
            image=image,
            reference=str(reference or ""),
            archive=archive,
            username=username,
            password_encrypted=encryption.encrypt(password) if password else "",
        )
        variant = ImageVariant.objects.create(image=image, family=CPU_ONLY, slug=f"{image.slug}-cpu", os="")
        reindex(image, [variant])
        _event(image, "", ImageStatus.IMPORTING, reason=source, by=user)
        from .. import tasks

        transaction.on_commit(lambda: tasks.import_image.delay(image.pk))
    return image


def run_import(image_id: int) -> str | None:
    """The task's work. Idempotent: an image that is no longer importing is left alone. Returns the new status."""
    record = ImageImport.objects.select_related("image", "image__owner").filter(image_id=image_id).first()
    if record is None or record.image.status != ImageStatus.IMPORTING:
        return None
    try:
        found = _import(record)
    except ServiceError as exc:
        oci.remove(record.tag)
        return _finish(record, ImageStatus.FAILED, str(exc.message))
    except Exception:  # a shape of image nobody foresaw: the import fails, and never stays "importing"
        log.exception("import of %s failed", record.reference)
        oci.remove(record.tag)
        return _finish(record, ImageStatus.FAILED, _("The image could not be imported: it is not one this site reads."))
    return _finish(record, ImageStatus.READY, "", found)


def _step(record: ImageImport, step: str) -> None:
    ImageImport.objects.filter(pk=record.pk).update(step=step)
    record.step = step


def _import(record: ImageImport) -> dict:
    _step(record, ImportStep.COPYING)
    try:
        _archive_copy(record) if record.archive else _registry_copy(record)
        digest, manifest, config = oci.read(record.tag)
    except (oci.TooBig, KeyError, ValueError) as exc:
        raise ImportFailed(_("The image's manifest or configuration is malformed or too large.")) from exc
    allowance = _allowance(record)
    packed = sum(int(layer.get("size", 0)) for layer in manifest.get("layers", []))
    if packed > allowance:
        raise _over_ceiling(record, packed, allowance)
    _step(record, ImportStep.UNPACKING)
    try:
        root = oci.unpack(record.tag, allowance)
    except oci.NoSpace as exc:
        raise ImportFailed(
            _(
                "The image's layers unpack to more than the %(left)s it may take (a layer holds far more than its "
                "size says), so it was not imported."
            )
            % {"left": filesizeformat(allowance)},
            code="quota_exceeded",
        ) from exc
    except oci.ToolFailed as exc:
        raise ImportFailed(_("The image's layers cannot be unpacked: %(reason)s") % {"reason": exc}) from exc
    _step(record, ImportStep.CHECKING)
    try:
        scan = rootfs.neutralise(str(root), limit=allowance)
    except rootfs.TooLarge as exc:
        raise _over_ceiling(record, exc.args[0], allowance) from exc
    except rootfs.TooDeep as exc:
        raise ImportFailed(_("The image's folders are nested too deeply.")) from exc
    settings_of = image_config(config)
    return {
        "digest": digest,
        "size": scan.size,
        "config": settings_of,
        "checks": rootfs.checks(str(root), settings_of.get("env", []), scan.families),
        "neutralised": {"cleared": scan.cleared[:100], "removed": scan.removed[:100]},
    }


def _registry_copy(record: ImageImport) -> None:
    parsed = references.parse(record.reference)
    plain_http = references.check_registry(parsed)  # again: the name may resolve elsewhere since it was typed
    password = encryption.decrypt(record.password_encrypted) if record.password_encrypted else ""
    source = {"username": record.username, "password": password, "plain_http": plain_http}
    try:
        packed, pinned = oci.packed_size(parsed, **source)
    except oci.Refused as exc:
        raise _elsewhere(exc) from exc
    except oci.ToolFailed as exc:
        raise ImportFailed(_("The registry refused the copy: %(reason)s") % {"reason": exc}) from exc
    except (oci.TooBig, ValueError) as exc:
        raise ImportFailed(_("The image's manifest or configuration is malformed or too large.")) from exc
    allowance = _allowance(record)
    if packed > allowance:  # refused before a layer is downloaded
        raise _over_ceiling(record, packed, allowance)
    try:
        oci.copy(pinned, record.tag, declared=packed, **source)
    except oci.Refused as exc:
        raise _elsewhere(exc) from exc
    except oci.ToolFailed as exc:
        raise ImportFailed(_("The registry refused the copy: %(reason)s") % {"reason": exc}) from exc


def _elsewhere(refused: oci.Refused) -> ImportFailed:
    return ImportFailed(
        _(
            "The registry sent the download to “%(host)s”, which is not a public address; nothing was sent there "
            "and the import was stopped."
        )
        % {"host": str(refused)[:100]},
        code="registry_refused",
    )


def _archive_copy(record: ImageImport) -> None:
    """Copy the archive out of the owner's storage into a file of the worker's own (what skopeo reads can then
    change under it no more), recognise its format and copy its image into the layout."""
    owner = record.image.owner
    try:
        entry = storage_services.find(owner, record.archive)
        if entry is None or entry.is_folder:
            raise NotFound(record.archive)
        _entry, source = storage_services.open_file(owner, entry.public_id)
    except ServiceError as exc:
        raise ImportFailed(
            _("The archive “%(path)s” is no longer in your cloud storage.") % {"path": record.archive}
        ) from exc
    allowance = _allowance(record)
    if entry.size > allowance:  # its layers are about its size: refused before a byte is copied
        raise _over_ceiling(record, entry.size, allowance)
    private = oci.archive_of(record.tag)
    try:
        with source, open(private, "wb") as copy:
            left = entry.size  # what the storage counted: a file that grew since is not read past it
            while left > 0 and (chunk := source.read(min(COPY_CHUNK, left))):
                copy.write(chunk)
                left -= len(chunk)
        kind = oci.archive_kind(private)
        if not kind:
            raise ImportFailed(
                _(
                    "The file is not an image archive: save one with “docker save” or as an OCI layout tar, "
                    "uncompressed (not .tar.gz)."
                )
            )
        try:
            oci.copy_archive(private, kind, record.tag)
        except oci.ToolFailed as exc:
            raise ImportFailed(_("The archive cannot be read as an image: %(reason)s") % {"reason": exc}) from exc
    finally:
        private.unlink(missing_ok=True)


def image_config(config: dict) -> dict:
    """The run settings of an image's config blob (entrypoint, cmd, env, working dir, user, exposed ports)."""
    section = config.get("config") if isinstance(config, dict) else None
    section = section if isinstance(section, dict) else {}
    found = {}
    for theirs, ours in CONFIG_KEYS.items():
        value = section.get(theirs)
        if theirs in ("Entrypoint", "Cmd", "Env"):
            value = [item for item in value if isinstance(item, str)] if isinstance(value, list) else None
        elif theirs == "ExposedPorts":
            value = sorted(key for key in value if isinstance(key, str)) if isinstance(value, dict) else None
        elif not isinstance(value, str):
            value = None
        if value not in (None, "", []):
            found[ours] = value
    return found


def _others(record: ImageImport) -> int:
    """Bytes of the owner's other imported images."""
    images = Image.objects.filter(owner=record.image.owner, imported__isnull=False).exclude(pk=record.image_id)
    return images.exclude(status=ImageStatus.FAILED).aggregate(total=Sum("size_bytes"))["total"] or 0


def _allowance(record: ImageImport) -> int:
    """How many bytes the image may take: what is left under the owner's storage ceiling, and never more than one
    image may take on this site (``IMAGE_IMPORT_MAX_GB``)."""
    owner = record.image.owner
    used = quota.usage_bytes(owner, besides=UsageSource.IMAGES) + _others(record)
    return max(0, min(quota.max_bytes() - used, int(settings.IMAGE_IMPORT_MAX_GB * quota.GB)))


def _over_ceiling(record: ImageImport, size: int, allowance: int) -> ImportFailed:
    return ImportFailed(
        _("The image needs at least %(size)s but only %(left)s of your storage is left.")
        % {"size": filesizeformat(size), "left": filesizeformat(allowance)},
        code="quota_exceeded",
    )


def record_usage(owner) -> None:
    """Record the owner's imported images' bytes in their storage."""
    quota.record_elsewhere(
        owner,
        UsageSource.IMAGES,
        lambda: (
            Image.objects.filter(owner=owner, imported__isnull=False)
            .exclude(status=ImageStatus.FAILED)
            .aggregate(total=Sum("size_bytes"))["total"]
            or 0
        ),
    )


def _finish(record: ImageImport, status: str, detail: str, found: dict | None = None) -> str | None:
    image = record.image
    found = found or {}
    with transaction.atomic():
        # updated_at too: an update() does not move it, and the image's page keeps its parts under it.
        changes = {"status": status, "status_detail": detail[:255], "updated_at": timezone.now()}
        if found:
            changes["size_bytes"] = found["size"]
        if not Image.objects.filter(pk=image.pk, status=ImageStatus.IMPORTING).update(**changes):
            return None  # another worker finished it first
        ImageImport.objects.filter(pk=record.pk).update(
            password_encrypted="",  # used once: not kept past the import
            step=ImportStep.DONE,
            finished_at=timezone.now(),
            digest=found.get("digest", ""),
            config=found.get("config", {}),
            checks=found.get("checks", {}),
            neutralised=found.get("neutralised", {}),
        )
        if found:
            family = found["checks"]["family"]
            ImageVariant.objects.filter(image=image).update(size_bytes=found["size"], family=family)
            if family:
                ImageVariant.objects.filter(image=image).update(slug=f"{image.slug}-{family}")
        _event(image, ImageStatus.IMPORTING, status, reason=detail)
        visitor_cache.bump(VISITOR_PAGES)  # the variants changed by update(): the pages that keep them are told
    record_usage(image.owner)
    return status


def confirm_family(user, image: Image, family: str) -> Image:
    """Record the chip family the owner says ``image`` is for (``""``: none, a CPU image): the launch wizard offers it
    on that family's chips first and warns when it is launched on another's. The variant keeps its slug, which
    instances and jobs already booted from it record."""
    if not hasattr(image, "imported"):
        raise Conflict(_("Only imported images have a chip family to confirm."), code="not_imported")
    if image.status != ImageStatus.READY:
        raise Conflict(_("Confirm the chip family once the import has ended."), code="importing")
    if family not in (CPU_ONLY, *Backend.values):
        raise FieldError(
            "family", _("Choose a chip family (npu, mlu, dcu, cuda) or none for CPU only."), code="invalid_family"
        )
    with transaction.atomic():
        ImageVariant.objects.filter(image=image).update(family=family)
        visitor_cache.bump(VISITOR_PAGES)  # an update() sends no signal: the image's kept page is told here
        ImageImport.objects.filter(image=image).update(family_confirmed=True)
        label = Backend(family).label if family else _("CPU only")
        _event(image, image.status, image.status, reason=_("Chip family: %(family)s") % {"family": label}, by=user)
    image.imported.family_confirmed = True
    return image


def image_family(image: Image) -> str:
    """The chip family an imported image is for now (its one variant's)."""
    return ImageVariant.objects.filter(image=image).values_list("family", flat=True).first() or CPU_ONLY


def remove_image(user, image: Image) -> None:
    """Delete the caller's imported image and its files (its layers stay while another image names them). The
    image's row is locked while it is checked and deleted: a launch booting it (which locks it too,
    ``services.hold_variant``) either commits first and is seen here, or waits and finds it gone."""
    if not hasattr(image, "imported"):
        raise Conflict(_("Only imported images can be removed here."), code="not_imported")
    with transaction.atomic():
        image = Image.objects.select_for_update(of=("self",)).select_related("imported").filter(pk=image.pk).first()
        if image is None:
            return  # removed by another request meanwhile
        _check_removable(image)
        tag, owner = image.imported.tag, image.owner
        image.delete()
    oci.remove(tag)
    record_usage(owner)


def _check_removable(image: Image) -> None:
    """Conflict when the image is still being imported or something boots from it (an instance, a launch waiting
    for a card, or whatever ``image_removal_asked``'s receivers name)."""
    if image.status == ImageStatus.IMPORTING:
        raise Conflict(_("The image is still being imported; remove it once the import has ended."), code="importing")
    slugs = image.variants.values("slug")
    if Instance.objects.filter(image__in=slugs).exclude(status__in=TERMINAL).exists():
        raise Conflict(_("Instances boot from this image; release them before removing it."), code="image_in_use")
    names = {image.slug, *(row["slug"] for row in slugs)}
    if WaitingLaunch.objects.filter(state=WaitingLaunch.State.WAITING, request__image__in=names).exists():
        raise Conflict(
            _("A launch waiting for a card boots from this image; leave the queue before removing it."),
            code="image_in_use",
        )
    for _receiver, why in image_removal_asked.send(sender=Image, image=image, slugs=names):
        if why:
            raise Conflict(why, code="image_in_use")
