"""Published repositories: what the Hugging Face Hub API (``marketplace.hub.hfapi``) does, as services.

A user publishes a model or a data set under a namespace of their own (the first part of ``org/name``, claimed the
first time they publish under it; the platform catalogue's organisations and other people's namespaces are
refused). Every upload is a commit on the default branch (``main``) with a message, an author and an id; each
commit keeps its whole tree, so any commit id resolves to the files it had. Small files arrive inline in the commit,
large ones (from ``HUB_LFS_THRESHOLD_BYTES``) through the LFS batch API first, to a signed address. Bytes are stored
once per SHA-256 (``blobs``). A README.md in a commit becomes the repository's card: its front matter fills the
licence, languages, chips and the rest, and the card is rendered and indexed for search as any hub item's is.

Catalogue entries the operator loaded without bytes have no commit: they are "metadata only", and every download
says so instead of failing half-way.
"""

import base64
import binascii
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.db import IntegrityError, transaction
from django.db.models import Q, Sum
from django.utils import timezone
from django.utils.translation import gettext as _

from accounts import tokens
from core import visitor_cache
from core.errors import Conflict, Forbidden, NotFound, ServiceError
from storage import mounts, quota
from storage import services as storage_services
from storage.choices import UsageSource
from storage.models import StoredElsewhere

from ..choices import HubKind, HubVisibility
from ..models import HubBlob, HubBlobUpload, HubCommit, HubItem, HubNamespace, HubTreeFile
from . import blobs, cards, services

log = logging.getLogger(__name__)
DEFAULT_BRANCH = "main"
SHA256 = re.compile(r"^[0-9a-f]{64}$")
COMMIT_ID = re.compile(r"^[0-9a-f]{40}$")
LFS_SIGNING_SALT = "marketplace.hub.lfs-upload"
LFS_UPLOAD_HOURS = 24


class RepoNotFound(NotFound):
    """No such repository, or one the caller may not see (the same answer, so a private name does not leak)."""


class RevisionNotFound(NotFound):
    pass


class EntryNotFound(NotFound):
    pass


class StaleParent(ServiceError):
    status = 412


class TooLarge(ServiceError):
    status = 413


# --- Reading ------------------------------------------------------------------------------------------------------


def _not_found(repo: str) -> RepoNotFound:
    return RepoNotFound(_("No model or dataset %(repo)s here.") % {"repo": repo}, code="RepoNotFound")


class TakenDown(Forbidden):
    pass


def readable(user, kind: str, repo: str) -> HubItem:
    """The repository if ``user`` may read it (anyone a public one; its owner a private one). One the back office
    took down is not found for others, and refused, with the reason, to its owner."""
    item = HubItem.objects.for_user(user, "view").filter(repo=repo, kind=kind).select_related("head").first()
    if item is None:
        raise _not_found(repo)
    if item.taken_down_at is not None:
        raise TakenDown(
            _("%(repo)s was taken down by the operator: %(reason)s") % {"repo": repo, "reason": item.takedown_reason},
            code="DisabledRepo",
        )
    return item


def writable(user, kind: str, repo: str) -> HubItem:
    """The repository if ``user`` may commit to it: its owner. Someone who can read it is told it is not theirs."""
    item = HubItem.objects.for_user(user, "change").filter(repo=repo, kind=kind).select_related("head").first()
    if item is not None:
        readable(user, kind, repo)  # taken down: refused, with the reason
        return item
    readable(user, kind, repo)  # a private or missing repository: not found
    raise Forbidden(_("You cannot write to %(repo)s: it is not yours.") % {"repo": repo}, code="not_owner")


def set_visibility(user, kind: str, repo: str, private: bool) -> HubItem:
    """Make one of ``user``'s repositories private or public (its page, the API's settings call)."""
    item = writable(user, kind, repo)
    visibility = HubVisibility.PRIVATE if private else HubVisibility.PUBLIC
    if item.visibility != visibility:
        item = services.save_item(repo=item.repo, owner=item.owner, kind=item.kind, visibility=visibility)
    return item


def metadata_only(item: HubItem) -> NotFound:
    return RevisionNotFound(
        _(
            "%(repo)s is in the catalogue as metadata only: its files are not stored on this hub. Mount it in an "
            "instance at %(path)s instead."
        )
        % {"repo": item.repo, "path": item.mount_path},
        code="RevisionNotFound",
    )


def revision(item: HubItem, rev: str) -> HubCommit:
    """The commit ``rev`` names: the default branch, or a commit id of this repository."""
    if item.head is None:
        raise metadata_only(item)
    if rev == DEFAULT_BRANCH:
        return item.head
    commit = HubCommit.objects.filter(item=item, oid=rev).first() if COMMIT_ID.match(rev or "") else None
    if commit is None:
        raise RevisionNotFound(
            _("Revision %(rev)s does not exist in %(repo)s.") % {"rev": rev, "repo": item.repo}, code="RevisionNotFound"
        )
    return commit


def tree(commit: HubCommit) -> list[HubTreeFile]:
    return list(commit.files.select_related("blob").order_by("path"))


def entry(commit: HubCommit, path: str) -> HubTreeFile:
    found = commit.files.select_related("blob").filter(path=path).first()
    if found is None:
        raise EntryNotFound(_("%(path)s is not in this revision.") % {"path": path}, code="EntryNotFound")
    return found


# --- Creating -----------------------------------------------------------------------------------------------------


# Namespaces that are the console's own first path segments: a repository there could not be reached at its
# download address inside instances (the relay refuses those segments) and would shadow nothing but confuse.
RESERVED_NAMESPACES = frozenset(
    {
        "api",
        "datasets",
        "hub-lfs",
        "hub-xet",
        "instances",
        "billing",
        "ops",
        "accounts",
        "console",
        "storage",
        "teams",
        "hub",
        "admin",
        "v1",
        "endpoints",
        "marketplace",
        "i18n",
        "static",
        "media",
        "healthz",
        "pricing",
        "chips",
        "catalog",
        "estimator",
    }
)


def claim_namespace(user, org: str) -> None:
    """Let ``user`` publish under ``org``: theirs already, or free (no one else's repositories live there)."""
    if org.lower() in RESERVED_NAMESPACES:
        raise Forbidden(_("%(org)s is reserved: choose another namespace.") % {"org": org}, code="namespace_reserved")
    claimed = HubNamespace.objects.filter(name__iexact=org).first()
    if claimed is not None:
        if claimed.user_id != user.pk:
            raise Forbidden(_("The namespace %(org)s belongs to someone else.") % {"org": org}, code="namespace_taken")
        return
    others = HubItem.objects.filter(repo__istartswith=f"{org}/").exclude(owner=user)
    if others.exists():
        raise Forbidden(_("The namespace %(org)s belongs to someone else.") % {"org": org}, code="namespace_taken")
    try:
        with transaction.atomic():
            claimed, _created = HubNamespace.objects.get_or_create(name=org, defaults={"user": user})
    except IntegrityError:  # the same name in another case, claimed at the same moment
        claimed = HubNamespace.objects.filter(name__iexact=org).first()
    if claimed is None or claimed.user_id != user.pk:
        raise Forbidden(_("The namespace %(org)s belongs to someone else.") % {"org": org}, code="namespace_taken")


def user_namespace(user) -> str:
    """The namespace a bare repository name goes under for ``user`` (the Hub puts ``create_repo("name")`` under the
    token's own user): the first namespace they claimed, else one made from their e-mail address's local part
    (``li.wei@…`` → ``li.wei``, then ``li.wei-2``… when taken or reserved), claimed for them now."""
    first = HubNamespace.objects.filter(user=user).order_by("created_at", "pk").first()
    if first is not None:
        return first.name
    local = re.sub(r"[^A-Za-z0-9._-]+", "-", user.email.partition("@")[0]).strip("._-")[:90] or "user"
    for number in range(1, 100):
        name = local if number == 1 else f"{local}-{number}"
        if name.lower() in RESERVED_NAMESPACES or not services.REPO_PATTERN.match(f"{name}/x"):
            continue
        try:
            claim_namespace(user, name)
        except Forbidden:
            continue
        return name
    name = f"user-{uuid.uuid4().hex[:12]}"
    claim_namespace(user, name)
    return name


@transaction.atomic
def create_repo(user, *, name, organization, private: bool, kind: str) -> HubItem:
    if kind not in HubKind.values:
        raise ServiceError(_("Choose a model or a dataset repository."), code="invalid_repo_type")
    if organization is None and isinstance(name, str):
        organization = user_namespace(user)
    if not isinstance(name, str) or not isinstance(organization, str) or not organization:
        raise ServiceError(_("Give the repository as namespace/name, e.g. demo/tiny."), code="invalid_repo_id")
    repo = f"{organization}/{name}"
    if not services.REPO_PATTERN.match(repo):
        raise ServiceError(
            _("%(repo)s is not a valid name: use letters, digits, “.”, “_” and “-”.") % {"repo": repo[:210]},
            code="invalid_repo_id",
        )
    claim_namespace(user, organization)  # someone else's namespace: refused before anything is said of its repos
    if HubItem.objects.filter(repo__iexact=repo).exists():
        raise Conflict(_("You already created a repository named %(repo)s.") % {"repo": repo}, code="repo_exists")
    visibility = HubVisibility.PRIVATE if private else HubVisibility.PUBLIC
    return services.save_item(repo=repo, owner=user, kind=kind, visibility=visibility, files=[])


# --- Uploading large files (the LFS batch API) ------------------------------------------------------------------


@dataclass(frozen=True)
class LfsObject:
    oid: str
    size: int


def _lfs_objects(objects) -> list[LfsObject]:
    if not isinstance(objects, list) or not objects or len(objects) > 1000:
        raise ServiceError(_("Send the files to upload as a list of objects."), code="invalid_lfs_batch")
    found = []
    for obj in objects:
        oid, size = (obj.get("oid"), obj.get("size")) if isinstance(obj, dict) else (None, None)
        if not isinstance(oid, str) or not SHA256.match(oid) or type(size) is not int or size < 0:
            raise ServiceError(_("Each object needs its SHA-256 (oid) and size."), code="invalid_lfs_batch")
        if size > settings.HUB_MAX_FILE_BYTES:
            raise TooLarge(_("The file is larger than the hub accepts."), code="file_too_large")
        found.append(LfsObject(oid, size))
    return found


def _known(user, item: HubItem, oids) -> set[str]:
    """The blobs this commit may name by hash alone: uploaded by ``user``, or already in ``item``'s history."""
    mine = set(HubBlobUpload.objects.filter(user=user, blob__sha256__in=oids).values_list("blob__sha256", flat=True))
    held = set(
        HubTreeFile.objects.filter(commit__item=item, blob__sha256__in=oids).values_list("blob__sha256", flat=True)
    )
    return mine | held


def lfs_batch(user, item: HubItem, objects, *, upload_url, verify_url, token_id: int | None = None) -> list[dict]:
    """What the client must upload: an upload and a verify action per object not already held. ``token_id``: the
    API token that asked; its upload addresses stop working the moment it is revoked."""
    wanted = _lfs_objects(objects)
    known = _known(user, item, {o.oid for o in wanted})
    sizes = dict(HubBlob.objects.filter(sha256__in=known).values_list("sha256", "size"))
    check_quota(item.owner, sum(o.size for o in wanted if sizes.get(o.oid) != o.size))
    answer = []
    for obj in wanted:
        if sizes.get(obj.oid) == obj.size:
            answer.append({"oid": obj.oid, "size": obj.size})
            continue
        claim = {"u": user.pk, "o": obj.oid, "s": obj.size, **({"t": token_id} if token_id else {})}
        ticket = signing.dumps(claim, salt=LFS_SIGNING_SALT, compress=True)
        answer.append(
            {
                "oid": obj.oid,
                "size": obj.size,
                "authenticated": True,
                "actions": {
                    "upload": {
                        "href": f"{upload_url(obj.oid)}?ticket={ticket}",
                        "header": {},
                        "expires_in": LFS_UPLOAD_HOURS * 3600,
                    },
                    "verify": {"href": verify_url(obj.oid), "header": {}},
                },
            }
        )
    return answer


def receive_lfs(oid: str, ticket, read) -> HubBlob:
    """Store an LFS upload sent to its signed address (no token: the ticket in the address is the permission)."""
    try:
        claim = signing.loads(ticket or "", salt=LFS_SIGNING_SALT, max_age=LFS_UPLOAD_HOURS * 3600)
    except signing.BadSignature:
        raise Forbidden(
            _("This upload address is invalid or has expired: ask for a new one."), code="invalid_upload_ticket"
        ) from None
    if claim.get("o") != oid:
        raise Forbidden(_("This upload address is for another file."), code="invalid_upload_ticket")

    user = get_user_model().objects.filter(pk=claim.get("u"), is_active=True).first()
    if user is None or ("t" in claim and not tokens.is_active(claim["t"], user)):
        raise Forbidden(
            _("This upload address is invalid or has expired: ask for a new one."), code="invalid_upload_ticket"
        )
    blob = blobs.store_stream(read, sha256=oid, size=int(claim.get("s", -1)), user=user)
    record_usage(user)  # held for them until a commit names it
    return blob


def verify_lfs(user, oid: str, size) -> None:
    if type(size) is not int:
        raise ServiceError(_("Each object needs its SHA-256 (oid) and size."), code="invalid_lfs_batch")
    if not HubBlobUpload.objects.filter(user=user, blob__sha256=oid, blob__size=size).exists():
        raise NotFound(_("No upload of this file has arrived."), code="upload_missing")


# --- Committing ---------------------------------------------------------------------------------------------------


def preupload(item: HubItem, files) -> list[dict]:
    """For each file the client announces, whether it goes inline ("regular") or through LFS."""
    if not isinstance(files, list) or len(files) > 10_000:
        raise ServiceError(_("Send the files as a list."), code="invalid_preupload")
    answer = []
    for f in files:
        path, size = (f.get("path"), f.get("size")) if isinstance(f, dict) else (None, None)
        if not isinstance(path, str) or type(size) is not int or size < 0:
            raise ServiceError(_("Each file needs its path and size."), code="invalid_preupload")
        mode = "lfs" if size >= settings.HUB_LFS_THRESHOLD_BYTES else "regular"
        answer.append({"path": path, "uploadMode": mode, "shouldIgnore": False})
    return answer


def clean_text(value) -> bool:
    """Text the database and the file system take as it is: no control characters, no lone surrogates."""
    if not isinstance(value, str) or any(ord(c) < 32 or ord(c) == 127 for c in value):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _path(value) -> str:
    """A file's path in a repository, as the Hub accepts it: relative, no empty, dot or `.git` parts (Git keeps its
    own files there), and no part that starts or ends with a space (names that look alike but are not)."""
    ok = (
        isinstance(value, str)
        and 0 < len(value) <= 500
        and not value.startswith("/")
        and "\\" not in value
        and clean_text(value)
        and all(_path_part_ok(part) for part in value.split("/"))
    )
    if not ok:
        raise ServiceError(
            _("%(path)s is not a valid file path in a repository.") % {"path": str(value)[:100]}, code="invalid_path"
        )
    return value


def _path_part_ok(part: str) -> bool:
    return part not in ("", ".", "..") and part.lower() != ".git" and part == part.strip() and len(part.encode()) <= 255


def lfs_pointer_oid(sha256: str, size: int) -> str:
    """The Git id of a large file's LFS pointer: what Git (and the Hub) list for it."""
    return blobs.git_blob_oid(
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()
    )


@dataclass
class _Change:
    path: str
    blob: HubBlob | None = None  # None: deleted
    git_oid: str = ""
    lfs: bool = False
    folder: bool = False
    readme: bytes | None = None


def parse_commit(user, item: HubItem, lines) -> tuple[dict, list[_Change]]:
    """The header and the operations of a commit body (NDJSON), small files stored as they are read."""
    header, changes, total = None, [], 0
    for raw in lines:
        total += len(raw)
        if total > settings.HUB_MAX_COMMIT_BYTES:
            raise TooLarge(_("The commit is too large: upload large files through LFS."), code="commit_too_large")
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise ServiceError(_("Each line of a commit must be a JSON object."), code="invalid_commit") from None
        key, value = (line.get("key"), line.get("value")) if isinstance(line, dict) else (None, None)
        if not isinstance(value, dict):
            raise ServiceError(_("Each line of a commit must be a JSON object."), code="invalid_commit")
        if key == "header":
            header = value
        elif key == "file":
            changes.append(_inline_file(user, value))
        elif key == "lfsFile":
            changes.append(_lfs_file(user, item, value))
        elif key in ("deletedFile", "deletedFolder"):
            changes.append(_Change(path=_path(str(value.get("path", "")).rstrip("/")), folder=key == "deletedFolder"))
        else:
            raise ServiceError(_("Unknown commit operation “%(key)s”.") % {"key": str(key)[:40]}, code="invalid_commit")
    summary = header.get("summary") if isinstance(header, dict) else None
    if not isinstance(summary, str) or not summary.strip():
        raise ServiceError(_("A commit needs a message."), code="invalid_commit")
    description = header.get("description") or ""
    if not clean_text(summary) or not isinstance(description, str) or not clean_text(description.replace("\n", " ")):
        raise ServiceError(_("A commit's message must be plain text."), code="invalid_commit")
    return header, changes


def _inline_file(user, value) -> _Change:
    path = _path(value.get("path"))
    if value.get("encoding") != "base64" or not isinstance(value.get("content"), str):
        raise ServiceError(_("A file's content must be base64."), code="invalid_commit")
    try:
        content = base64.b64decode(value["content"], validate=True)
    except (binascii.Error, ValueError):
        raise ServiceError(_("A file's content must be base64."), code="invalid_commit") from None
    blob = blobs.store_bytes(content, user=user)
    readme = content if path.lower() == "readme.md" else None
    return _Change(path=path, blob=blob, git_oid=blobs.git_blob_oid(content), readme=readme)


def _lfs_file(user, item, value) -> _Change:
    path, oid, size = _path(value.get("path")), value.get("oid"), value.get("size")
    if type(size) is not int or size < 0:
        raise ServiceError(_("A large file needs its size."), code="invalid_commit")
    if value.get("algo", "sha256") != "sha256" or not isinstance(oid, str) or not SHA256.match(oid):
        raise ServiceError(_("A large file is named by its SHA-256."), code="invalid_commit")
    blob = HubBlob.objects.filter(sha256=oid, size=size).first()
    if blob is None or oid not in _known(user, item, {oid}):
        raise ServiceError(
            _("%(path)s was not uploaded: upload it through LFS first.") % {"path": path}, code="lfs_missing"
        )
    return _Change(path=path, blob=blob, git_oid=lfs_pointer_oid(oid, blob.size), lfs=True)


def hub_bytes(user) -> int:
    """What ``user``'s published repositories hold: every distinct file in any of their commits (older revisions
    stay downloadable), part of their storage."""
    return HubBlob.objects.filter(_counted(user)).aggregate(total=Sum("size"))["total"] or 0


def _counted(user) -> Q:
    """The files :func:`hub_bytes` counts for ``user``: in any commit of theirs, or uploaded by them and in no
    commit yet (they hold space until a commit names them)."""
    committed = HubTreeFile.objects.filter(commit__item__owner=user).values("blob_id")
    pending = HubBlobUpload.objects.filter(user=user).exclude(blob__in=HubTreeFile.objects.values("blob_id"))
    return Q(pk__in=committed) | Q(pk__in=pending.values("blob_id"))


def _storage_committed(user) -> int:
    """Everything that counts against ``user``'s storage ceiling, the hub's bytes counted live."""
    return quota.usage_bytes(user, besides=UsageSource.HUB) + quota.reserved_bytes(user) + hub_bytes(user)


def record_usage(user) -> None:
    """Tell storage what ``user``'s repositories hold now: it counts them in the usage bar and GB-day billing."""
    quota.record_elsewhere(user, UsageSource.HUB, lambda: hub_bytes(user))


def record_all_usage() -> int:
    """Record every publisher's hub bytes again (hourly, after the orphan sweep removed files). Returns how many."""
    users = set(HubItem.objects.filter(commits__isnull=False).values_list("owner_id", flat=True))
    users |= set(HubBlobUpload.objects.values_list("user_id", flat=True))
    users |= set(StoredElsewhere.objects.filter(source=UsageSource.HUB).values_list("owner_id", flat=True))
    users.discard(None)

    for user in get_user_model().objects.filter(pk__in=users).iterator():
        record_usage(user)
    return len(users)


def check_quota(user, more: int) -> None:
    """Refuse ``more`` new bytes past the owner's storage limit (cloud storage and published repositories)."""
    if _storage_committed(user) + more > quota.max_bytes():
        raise TooLarge(
            _("This would take your storage past its limit of %(gb)s GB.") % {"gb": settings.STORAGE_MAX_GB},
            code="storage_quota",
        )


# The item's fields a commit keeps as they are, unless its README.md (the card) says otherwise.
KEPT_FIELDS = (
    "summary",
    "summary_zh",
    "task",
    "licence",
    "library_name",
    "languages",
    "parameters_b",
    "rows",
    "frameworks",
    "chips",
    "tags",
    "card",
)


def _fields_from_card(item: HubItem, readme: bytes | None) -> dict:
    """The item's fields after a commit: a new README.md's front matter decides the licence, task, library,
    languages, tags and chip families (``chips: [npu, mlu]``), the rest is kept."""
    fields = {name: getattr(item, name) for name in KEPT_FIELDS}
    if readme is None:
        return fields
    text = readme.decode("utf-8", "replace")
    front, _body = cards.split(text)
    meta = cards.meta(front)

    def fit(values):  # what the filters hold: a mirrored card with many languages or long tags is cut, not refused
        return [v for v in values if len(v) <= services.MAX_LIST_VALUE][: services.MAX_LIST_ITEMS]

    return fields | {
        "card": text,
        "licence": meta.licence,
        "task": meta.task,
        "library_name": meta.library_name,
        "languages": fit(meta.languages),
        "tags": fit(meta.tags),
        "chips": fit(cards._strings(front.get("chips"))),
    }


@transaction.atomic
def commit(user, kind: str, repo: str, rev: str, lines) -> HubCommit:
    """Apply a commit body to the default branch of ``repo`` (its owner only)."""
    if rev != DEFAULT_BRANCH:
        raise ServiceError(_("Commits go to the default branch, main."), code="invalid_revision")
    item = writable(user, kind, repo)
    # One commit at a time per repository (only the item's row is locked, not its head's).
    item = HubItem.objects.select_for_update(of=("self",)).select_related("head").get(pk=item.pk)
    header, changes = parse_commit(user, item, lines)
    parent = header.get("parentCommit")
    if parent and (item.head is None or parent != item.head.oid):
        raise StaleParent(
            _("The repository changed since %(parent)s: fetch it and try again.") % {"parent": parent},
            code="stale_parent",
        )
    files = {f.path: f for f in (tree(item.head) if item.head else [])}
    readme = None
    for change in changes:
        if change.blob is None:
            prefix = change.path + "/"
            for path in [p for p in files if p == change.path or (change.folder and p.startswith(prefix))]:
                del files[path]
        else:
            files[change.path] = HubTreeFile(
                path=change.path, blob=change.blob, size=change.blob.size, git_oid=change.git_oid, lfs=change.lfs
            )
            if change.readme is not None:
                readme = change.readme
    folders = {p.rsplit("/", 1)[0] for p in files if "/" in p}
    folders |= {f.rsplit("/", i)[0] for f in folders for i in range(1, f.count("/") + 1)}
    clash = sorted(set(files) & folders)
    if clash:
        raise ServiceError(
            _("%(path)s cannot be both a file and a folder.") % {"path": clash[0][:100]}, code="invalid_path"
        )
    blobs_in_tree = {f.blob.pk: f.blob.size for f in files.values()}
    owner = item.owner  # who may commit (writable): their storage holds it
    counted = set(HubBlob.objects.filter(_counted(owner), pk__in=blobs_in_tree).values_list("pk", flat=True))
    new_bytes = sum(size for pk, size in blobs_in_tree.items() if pk not in counted)
    if _storage_committed(owner) + new_bytes > quota.max_bytes():
        raise TooLarge(
            _("This commit would take your storage past its limit of %(gb)s GB.") % {"gb": settings.STORAGE_MAX_GB},
            code="storage_quota",
        )
    new = _record_commit(item, user, header, files, readme)
    record_usage(owner)
    return new


def _record_commit(
    item: HubItem, author, header: dict, files: dict[str, HubTreeFile], readme, *, salt: str | None = None
) -> HubCommit:
    """Save ``files`` (path → file) as the new head of ``item``, its file list and size with it, and lay the tree
    out for mounts once the transaction commits. The commit's id hashes its parent, tree and message with ``salt``
    (random unless given: two people's identical commits stay two commits)."""
    listing = "\n".join(f"{p}\0{f.git_oid}" for p, f in sorted(files.items()))
    salt = str(uuid.uuid4()) if salt is None else salt
    seed = f"{item.head.oid if item.head else ''}\n{listing}\n{header.get('summary')}\n{salt}"
    new = HubCommit.objects.create(
        item=item,
        oid=hashlib.sha1(seed.encode(), usedforsecurity=False).hexdigest(),
        parent=item.head,
        summary=header["summary"].strip()[:500],
        description=str(header.get("description") or "")[:20000],
        author=author,
    )
    HubTreeFile.objects.bulk_create(
        HubTreeFile(commit=new, path=f.path, blob=f.blob, size=f.size, git_oid=f.git_oid, lfs=f.lfs)
        for f in files.values()
    )
    listed = [(p, f.size) for p, f in sorted(files.items())]
    size = sum(f.size for f in files.values())
    services.save_item(
        repo=item.repo,
        owner=item.owner,
        kind=item.kind,
        visibility=item.visibility,
        size_bytes=size,
        files=listed,
        **_fields_from_card(item, readme),
    )
    HubItem.objects.filter(pk=item.pk).update(head=new)
    transaction.on_commit(lambda: _materialise_quietly(item.repo))
    return new


@transaction.atomic
def publish_catalogue_files(repo: str, contents: dict[str, bytes], summary: str) -> HubCommit | None:
    """Make ``contents`` (path → bytes) the whole tree of the platform's catalogue repository ``repo`` — how the
    install gives starter entries real files — unless its head already holds exactly these. The bytes are stored
    once by SHA-256 like any upload; a catalogue repository has no owner, so they count against nobody's storage."""
    item = HubItem.objects.select_for_update(of=("self",)).select_related("head").get(repo=repo, owner__isnull=True)
    current = {f.path: f.blob.sha256 for f in tree(item.head)} if item.head else {}
    if current == {path: hashlib.sha256(content).hexdigest() for path, content in contents.items()}:
        return None
    files = {}
    for path, content in sorted(contents.items()):
        blob = blobs.store_bytes(content)
        large = len(content) >= settings.HUB_LFS_THRESHOLD_BYTES
        oid = lfs_pointer_oid(blob.sha256, blob.size) if large else blobs.git_blob_oid(content)
        files[_path(path)] = HubTreeFile(path=path, blob=blob, size=blob.size, git_oid=oid, lfs=large)
    # The same release builds the same files: the same commit id on every install (a catalogue commit is made only
    # when the tree changed, so it never repeats one).
    return _record_commit(item, None, {"summary": summary}, files, None, salt="catalogue")


def _materialise_quietly(repo: str) -> None:
    """After the commit: a failure to lay the files out is logged, never the commit's (it is saved already)."""
    try:
        materialise(repo)
    except Exception:  # noqa: BLE001 - the commit stands; the next one lays the tree out again
        log.exception("could not lay out %s for mounts", repo)


def materialise(repo: str) -> None:
    """Lay the latest tree of ``repo`` out under ``LOCAL_HUB_ROOT/<repo>``, the folder the local backend mounts
    read-only at ``/root/public/<repo>``: each file a hard link to its stored blob, so mounting copies nothing.
    Updated in place (machines that mount it see the new files at once); files no longer in the tree go. Only where
    the blobs are on this machine's disk."""
    item = HubItem.objects.filter(repo=repo).select_related("head").first()
    if item is None or item.head is None or item.taken_down_at is not None:
        return
    root = Path(settings.LOCAL_HUB_ROOT) / item.repo
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one layout of a repository at a time; the latest head wins
        item.refresh_from_db()
        if item.taken_down_at is None:  # taken down meanwhile: its folder stays empty
            _lay_out(item, root)


def _lay_out(item: HubItem, root: Path) -> None:
    files = tree(item.head)
    sources = {f.path: blobs.local_path(f.blob) for f in files}
    if any(source is None for source in sources.values()):
        return  # blobs in S3: machines download through HF_ENDPOINT instead
    _readable_folder(root)
    for path, source in sources.items():
        target = root / path
        for parent in reversed(target.relative_to(root).parents[:-1]):  # a file where a folder now goes
            if (root / parent).is_file() or (root / parent).is_symlink():
                (root / parent).unlink()
            _readable_folder(root / parent)
        if target.is_dir() and not target.is_symlink():  # a folder where a file now goes
            shutil.rmtree(target)
        if target.exists() and os.path.samefile(target, source):
            continue
        staged = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}")
        try:
            os.link(source, staged)
        except OSError:  # another file system: a copy, as a last resort
            shutil.copyfile(source, staged)
            os.chmod(staged, 0o644)
        os.replace(staged, target)
    wanted = {str(root / p) for p in sources}
    for existing in sorted(root.rglob("*"), reverse=True):
        if existing.is_file() and str(existing) not in wanted:
            existing.unlink()
        elif existing.is_dir() and not any(existing.iterdir()):
            existing.rmdir()


def _readable_folder(path: Path) -> None:
    """A folder of a repository's layout, readable by all: machines of every owner list it where it is mounted (the
    console's umask would make it its own alone). The folders above the repository's stay the console's."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o755)


def card_data(item: HubItem) -> dict:
    """The card's front matter as plain JSON values (what the repository info's ``cardData`` carries)."""
    try:
        front, _body = cards.split(item.card or "")
    except ServiceError:
        return {}
    return json.loads(json.dumps(front, default=str)) if isinstance(front, dict) else {}


# --- From the browser -----------------------------------------------------------------------------------------------


@transaction.atomic
def commit_uploads(user, item: HubItem, summary: str, uploads) -> HubCommit:
    """Commit files a browser sent (``uploads``: (path, file) pairs) to ``item``: small ones inline, large ones
    stored first and named by their hash, exactly as the client's LFS path does."""
    lines = [json.dumps({"key": "header", "value": {"summary": summary}})]
    for path, handle in uploads:
        if handle.size >= settings.HUB_LFS_THRESHOLD_BYTES:
            blob = blobs.store_file(handle, user=user)
            value = {"path": path, "algo": "sha256", "oid": blob.sha256, "size": blob.size}
            lines.append(json.dumps({"key": "lfsFile", "value": value}))
        else:
            content = base64.b64encode(handle.read()).decode()
            lines.append(json.dumps({"key": "file", "value": {"path": path, "content": content, "encoding": "base64"}}))
    return commit(user, item.kind, item.repo, DEFAULT_BRANCH, (line.encode() for line in lines))


@transaction.atomic
def commit_from_storage(user, item: HubItem, summary: str, storage_path: str, folder: str = "") -> HubCommit:
    """Commit a file of the user's cloud storage, uploaded there resumably (its tus uploads survive a dropped
    connection): the way a large file goes from a browser into a repository. The bytes are stored once by hash."""
    entry = storage_services.find(user, storage_path)  # NotFound for nothing, or someone else's, at that path
    if entry is None or entry.is_folder:
        raise ServiceError(_("Choose a file of your cloud storage, not a folder."), code="not_a_file")
    _entry, handle = storage_services.open_file(user, entry.public_id)
    with handle:
        check_quota(item.owner, entry.size)
        blob = blobs.store_file(handle, user=user)
    path = _path(f"{folder.strip('/')}/{entry.name}" if folder.strip("/") else entry.name)
    value = {"path": path, "algo": "sha256", "oid": blob.sha256, "size": blob.size}
    lines = [
        json.dumps({"key": "header", "value": {"summary": summary}}),
        json.dumps({"key": "lfsFile", "value": value}),
    ]
    return commit(user, item.kind, item.repo, DEFAULT_BRANCH, (line.encode() for line in lines))


def commit_card(user, item: HubItem, text: str, summary: str = "") -> HubCommit:
    """Commit a new README.md (the card): its front matter must be valid YAML."""
    cards.split(text)  # a clear error before anything is written
    content = base64.b64encode(text.encode()).decode()
    lines = [
        json.dumps({"key": "header", "value": {"summary": summary or "Update README.md"}}),
        json.dumps({"key": "file", "value": {"path": "README.md", "content": content, "encoding": "base64"}}),
    ]
    return commit(user, item.kind, item.repo, DEFAULT_BRANCH, (line.encode() for line in lines))


def history(item: HubItem, limit: int = 20) -> list[HubCommit]:
    return list(HubCommit.objects.filter(item=item).select_related("author").order_by("-created_at", "-id")[:limit])


# --- The back office ------------------------------------------------------------------------------------------------


@transaction.atomic
def take_down(item: HubItem, reason: str) -> HubItem:
    """Hide a repository from everyone but its owner and stop its downloads (the caller audits it)."""
    HubItem.objects.filter(pk=item.pk).update(taken_down_at=timezone.now(), takedown_reason=reason[:500])
    visitor_cache.bump("hub-list")  # an update() sends no signal: the visitor's hub list is told here
    services.search.sync([item.pk])
    item.refresh_from_db()
    transaction.on_commit(lambda: _clear_layout_quietly(item.repo))
    return item


def _clear_layout_quietly(repo: str) -> None:
    try:
        _clear_layout(repo)
    except OSError:
        log.exception("could not empty the mounted folder of %s", repo)
        return
    mounts.hand_over_again(repo)  # machines holding a copy of the files (Slurm's) drop it


def _clear_layout(repo: str) -> None:
    """Empty the folder machines mount the repository from: mounted, it shows nothing any more (under the same
    lock as a layout, so a commit laid out at the same moment cannot put the files back)."""
    root = Path(settings.LOCAL_HUB_ROOT) / repo
    if not root.parent.is_dir():
        return
    with open(root.parent / f".{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if root.is_dir():
            for path in sorted(root.rglob("*"), reverse=True):
                if path.is_dir() and not path.is_symlink():
                    path.rmdir()
                else:
                    path.unlink()


@transaction.atomic
def restore(item: HubItem) -> HubItem:
    HubItem.objects.filter(pk=item.pk).update(taken_down_at=None, takedown_reason="")
    visitor_cache.bump("hub-list")
    services.search.sync([item.pk])
    item.refresh_from_db()
    transaction.on_commit(lambda: _restore_layout(item.repo))
    return item


def _restore_layout(repo: str) -> None:
    _materialise_quietly(repo)
    mounts.hand_over_again(repo)  # machines holding a copy of the files (Slurm's) get them back
