"""The Hugging Face Hub HTTP API, the part ``huggingface_hub`` uses, at the console's root URL (``HF_ENDPOINT``).

Repository info and trees (``/api/models/{repo}[/revision/{rev}]``, ``/api/{type}s/{repo}/tree/{rev}``), downloads
(``/{repo}/resolve/{rev}/{path}`` with ``X-Repo-Commit``, ``ETag``, sizes and ``Range``), repository creation
(``/api/repos/create``) and uploads: ``preupload``, the LFS batch API (``/{repo}.git/info/lfs/objects/batch``) with
signed upload addresses, and the NDJSON commit endpoint. Data sets live under ``datasets/`` as on huggingface.co.

The caller is who their ``Authorization: Bearer gpc_…`` token says (``HF_TOKEN``); downloads also take the browser's
session. Errors are JSON ``{"error": …}`` with the ``X-Error-Code`` the client turns into its own exceptions
(``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``); a private repository is "not found" to others, and a
bad or revoked token is 401, never an anonymous request.
"""

import json
import re
from urllib.parse import quote

from django.conf import settings
from django.http import FileResponse, HttpResponse, HttpResponsePermanentRedirect, JsonResponse, StreamingHttpResponse
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt

from accounts import tokens
from core.db import hand_back_connection
from core.errors import Conflict, Forbidden, ServiceError
from core.streaming import send_as_read

from ..choices import HubKind, HubVisibility
from . import blobs, cards, repos, search, services, xet

KINDS = {"models": HubKind.MODEL, "datasets": HubKind.DATASET, "model": HubKind.MODEL, "dataset": HubKind.DATASET}
INVALID_CREDENTIALS = "Invalid credentials in Authorization header"
RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


class Unauthenticated(Exception):
    pass


def _caller(request, *, write: bool):
    """The user the request acts for: its token's, or (reading only) the session's; anonymous otherwise."""
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _sep, value = header.partition(" ")
        token = tokens.authenticate_token(value.strip()) if scheme.lower() == "bearer" else None
        if token is None:
            raise Unauthenticated
        if token.team_id is not None:
            raise Forbidden(_("A team's API token cannot be used on the hub: use a personal token."), code="team_token")
        if write and not token.can_write:
            raise Forbidden(
                _("This API token can only read: create a read-write token to publish."), code="read_only_token"
            )
        request.hub_token_id = token.pk
        request.hub_token = token
        return token.user
    if not write and request.user.is_authenticated:
        return request.user
    return None


def _error(status: int, message: str, code: str = "", **extra) -> JsonResponse:
    response = JsonResponse({"error": str(message), **extra}, status=status)
    if code:
        response["X-Error-Code"] = code
    text = str(message)
    if text.isascii() and text.isprintable():  # a header never carries a line break or a control character
        response["X-Error-Message"] = text
    return response


def endpoint(write: bool = False, methods=("GET",)):
    """Wrap a Hub API view: method check, the caller, and errors as the client expects them."""

    def wrap(view):
        @csrf_exempt
        def run(request, *args, **kwargs):
            if request.method not in methods:
                return _error(405, _("Method not allowed."))
            try:
                user = _caller(request, write=write)
                if write and user is None:
                    return _error(401, _("Log in with an API token (HF_TOKEN=gpc_…) to write to the hub."))
                return view(request, user, *args, **kwargs)
            except Unauthenticated:
                return _error(401, INVALID_CREDENTIALS)
            except ServiceError as exc:
                known = ("RepoNotFound", "RevisionNotFound", "EntryNotFound", "DisabledRepo")
                code = exc.code if exc.code in known else ""
                return _error(exc.status, exc.message, code)

        return run

    return wrap


def _json_body(request):
    try:
        body = json.loads(request.body or b"{}")
    except (ValueError, UnicodeDecodeError):
        raise ServiceError(_("The request body must be JSON."), code="invalid_json") from None
    if not isinstance(body, dict):
        raise ServiceError(_("The request body must be a JSON object."), code="invalid_json")
    return body


# --- Reading ------------------------------------------------------------------------------------------------------


def _info(item, commit) -> dict:
    files = repos.tree(commit) if commit else []
    info = {
        "_id": str(item.public_id),
        "id": item.repo,
        "author": item.org,
        "sha": commit.oid if commit else None,
        "lastModified": (commit.created_at if commit else item.updated_at).isoformat().replace("+00:00", "Z"),
        "createdAt": item.created_at.isoformat().replace("+00:00", "Z"),
        "private": item.visibility == HubVisibility.PRIVATE,
        "disabled": False,
        "gated": False,
        "downloads": item.mount_count,
        "likes": item.likes_count,
        "tags": item.tags,
        "cardData": repos.card_data(item),
        "usedStorage": item.size_bytes,
        "siblings": [
            {
                "rfilename": f.path,
                "size": f.size,
                "blobId": f.git_oid,
                **({"lfs": {"sha256": f.blob.sha256, "size": f.size, "pointerSize": 134}} if f.lfs else {}),
            }
            for f in files
        ],
        "metadataOnly": commit is None,
    }
    if item.kind == HubKind.MODEL:
        info |= {"modelId": item.repo, "pipeline_tag": item.task or None, "library_name": item.library_name or None}
    return info


def _listed(item) -> dict:
    """What a list of repositories says of each (as the Hub's lists: no file list unless asked for)."""
    info = {
        "_id": str(item.public_id),
        "id": item.repo,
        "author": item.org,
        "lastModified": item.updated_at.isoformat().replace("+00:00", "Z"),
        "createdAt": item.created_at.isoformat().replace("+00:00", "Z"),
        "private": item.visibility == HubVisibility.PRIVATE,
        "disabled": False,
        "gated": False,
        "downloads": item.mount_count,
        "likes": item.likes_count,
        "tags": item.tags,
        "metadataOnly": item.head_id is None,
    }
    if item.kind == HubKind.MODEL:
        info |= {"modelId": item.repo, "pipeline_tag": item.task or None, "library_name": item.library_name or None}
    return info


# The Hub's sort keys (huggingface_hub's ``sort=``) in this hub's orders; descending unless ``direction=1``.
LIST_SORTS = {
    "downloads": ("mount_count", "id"),
    "likes": ("likes_count", "id"),
    "lastModified": ("updated_at", "id"),
    "createdAt": ("created_at", "id"),
    "trendingScore": ("likes_count", "id"),
    "id": ("repo",),
}
LIST_PAGE = 1000  # the Hub's own page size for an unlimited list


@endpoint()
def list_repos(request, user, kind):
    """``list_models`` / ``list_datasets``: ``author``, ``search``, ``sort``, ``direction``, ``limit``; pages
    of at most 1,000 linked by a ``Link: rel="next"`` header, as the Hub pages them."""
    params = request.GET
    sort = params.get("sort") or "downloads"
    if sort not in LIST_SORTS:
        raise ServiceError(_("Unknown sort order “%(sort)s”.") % {"sort": sort[:50]}, code="invalid_sort")
    try:
        limit = min(int(params.get("limit") or LIST_PAGE), LIST_PAGE)
        offset = max(int(params.get("offset") or 0), 0)
    except ValueError:
        raise ServiceError(_("limit and offset must be whole numbers."), code="invalid_limit") from None
    if limit < 1:
        raise ServiceError(_("limit and offset must be whole numbers."), code="invalid_limit")
    query = search.HubQuery(q=(params.get("search") or "")[:200], kind=KINDS[kind])
    items = services.search_items(user, query)
    if author := params.get("author"):
        items = items.filter(repo__istartswith=f"{author}/")
    descending = params.get("direction") != "1" and sort != "id"
    items = items.order_by(*(f"-{f}" if descending else f for f in LIST_SORTS[sort]))
    page = list(items[offset : offset + limit + 1])
    response = JsonResponse([_listed(item) for item in page[:limit]], safe=False)
    if len(page) > limit and "limit" not in params:
        following = params.copy()
        following["offset"] = str(offset + limit)
        response["Link"] = f'<{request.build_absolute_uri(request.path)}?{following.urlencode()}>; rel="next"'
    return response


@endpoint()
def whoami(request, user):
    """Who a token belongs to (``hf auth login`` and ``whoami``): the user's hub namespace as their name, the
    other namespaces they publish under as organisations, and the token's name and role."""
    token = getattr(request, "hub_token", None)
    if user is None or token is None:
        return _error(401, INVALID_CREDENTIALS)
    name = repos.user_namespace(user)
    others = repos.HubNamespace.objects.filter(user=user).exclude(name=name).order_by("name")
    return JsonResponse(
        {
            "type": "user",
            "id": str(user.public_id),
            "name": name,
            "fullname": user.get_full_name() or name,
            "email": user.email,
            "emailVerified": True,
            "isPro": False,
            "canPay": False,
            "orgs": [{"type": "org", "name": org.name, "fullname": org.name} for org in others],
            "auth": {
                "type": "access_token",
                "accessToken": {"displayName": token.name, "role": "write" if token.can_write else "read"},
            },
        }
    )


def repo_page(request, repo, prefix=""):
    """``/<namespace>/<name>`` (and ``/datasets/…``): a permanent redirect to the repository's page, which says
    "not found" alike for a missing and a private repository."""
    org, _sep, name = repo.partition("/")
    return HttpResponsePermanentRedirect(reverse("marketplace:hub-item", args=[org, name]))


@endpoint()
def repo_info(request, user, kind, repo, revision=None):
    item = repos.readable(user, KINDS[kind], repo)
    if revision is None and item.head is None:
        return JsonResponse(_info(item, None))  # a catalogue entry: what it is, and that it has no files here
    return JsonResponse(_info(item, repos.revision(item, revision or repos.DEFAULT_BRANCH)))


@endpoint()
def repo_tree(request, user, kind, repo, revision, path=""):
    item = repos.readable(user, KINDS[kind], repo)
    commit = repos.revision(item, revision)
    prefix = path.strip("/")
    recursive = request.GET.get("recursive") in ("1", "true", "True")
    entries, folders = [], set()
    for f in repos.tree(commit):
        if prefix and not f.path.startswith(prefix + "/"):
            continue
        rest = f.path[len(prefix) + 1 :] if prefix else f.path
        if "/" in rest and not recursive:
            folders.add((prefix + "/" if prefix else "") + rest.split("/", 1)[0])
            continue
        if recursive:
            parts = rest.split("/")[:-1]
            for i in range(len(parts)):
                folders.add((prefix + "/" if prefix else "") + "/".join(parts[: i + 1]))
        entry = {"type": "file", "oid": f.git_oid, "size": f.size, "path": f.path}
        if f.lfs:
            entry["lfs"] = {"oid": f.blob.sha256, "size": f.size, "pointerSize": 134}
        entries.append(entry)
    if prefix and not entries and not folders:
        raise repos.EntryNotFound(_("%(path)s is not in this revision.") % {"path": prefix}, code="EntryNotFound")
    listing = [{"type": "directory", "oid": "", "size": 0, "path": p} for p in sorted(folders)] + entries
    return JsonResponse(listing, safe=False)


@endpoint(methods=("GET", "HEAD"))
def resolve(request, user, repo, revision, path, kind="models"):
    item = repos.readable(user, KINDS[kind], repo)
    if item.head is None:
        raise repos.EntryNotFound(repos.metadata_only(item).message, code="EntryNotFound")
    if not repos.clean_text(path):
        raise repos.EntryNotFound(_("No such file."), code="EntryNotFound")
    commit = repos.revision(item, revision)
    found = repos.entry(commit, path)
    size, start, length, status = found.size, 0, found.size, 200
    wanted = request.headers.get("Range", "")
    if wanted and request.method == "GET":
        match = RANGE.match(wanted.strip())
        if match is None or (not match.group(1) and not match.group(2)):
            return _range_not_satisfiable(size)
        first, last = match.group(1), match.group(2)
        if first:
            start = int(first)
            end = min(int(last), size - 1) if last else size - 1
        else:  # the last N bytes
            start = max(size - int(last), 0)
            end = size - 1
        if start >= size or end < start:
            return _range_not_satisfiable(size)
        length, status = end - start + 1, 206
    local = blobs.download_path(found.blob) if request.method == "GET" and status == 200 else None
    if request.method == "HEAD":
        response = HttpResponse(status=200)
    elif local is not None:  # the whole file from local disk: a WSGI server may send it with sendfile(2)
        response = FileResponse(open(local, "rb"))  # noqa: SIM115 - FileResponse closes it
        response.block_size = blobs.CHUNK  # where the server cannot sendfile(2): 1 MB reads, not 4 KB
    else:
        response = StreamingHttpResponse(blobs.read_range(found.blob, start, length), status=status)
        if status == 206:
            response["Content-Range"] = f"bytes {start}-{start + length - 1}/{size}"
    response["Content-Type"] = "application/octet-stream"
    response["Content-Length"] = str(length if request.method == "GET" else size)
    response["Accept-Ranges"] = "bytes"
    response["ETag"] = f'"{found.etag}"'
    response["X-Repo-Commit"] = commit.oid
    if found.lfs:
        response["X-Linked-Etag"] = f'"{found.blob.sha256}"'
        response["X-Linked-Size"] = str(size)
    response["Content-Disposition"] = f"attachment; filename*=UTF-8''{_quoted(path.rsplit('/', 1)[-1])}"
    if request.method == "GET":
        hand_back_connection()  # a model file can take minutes to send: nothing of it is read from the database
        send_as_read(request, response)
    return response


def _quoted(name: str) -> str:
    return quote(name, safe="")


def _range_not_satisfiable(size: int) -> HttpResponse:
    response = _error(416, _("The requested range is not in the file."))
    response["Content-Range"] = f"bytes */{size}"
    return response


# --- Writing ------------------------------------------------------------------------------------------------------


def _wants_private(body: dict) -> bool:
    """Whether a new repository is private, as the client says it: ``visibility`` ("public" or "private", what
    current clients send) or ``private`` (a boolean, older clients). A value this hub cannot honour is refused,
    never read as public."""
    visibility, private = body.get("visibility"), body.get("private")
    if private is not None and not isinstance(private, bool):
        raise ServiceError(_("“private” must be true or false."), code="invalid_visibility")
    if visibility is None:
        return bool(private)
    if visibility not in ("public", "private"):
        raise ServiceError(_("Visibility must be “public” or “private”."), code="invalid_visibility")
    if private is not None and private != (visibility == "private"):
        raise ServiceError(_("“private” and “visibility” disagree: send one of them."), code="invalid_visibility")
    return visibility == "private"


@endpoint(write=True, methods=("POST",))
def create_repo(request, user):
    body = _json_body(request)
    wanted = body.get("type") or "model"
    kind = KINDS.get(wanted) if isinstance(wanted, str) else None
    if kind is None:
        raise ServiceError(_("This hub holds models and datasets only."), code="invalid_repo_type")
    prefix = "" if kind == HubKind.MODEL else "datasets/"
    try:
        item = repos.create_repo(
            user, name=body.get("name"), organization=body.get("organization"), private=_wants_private(body), kind=kind
        )
    except Conflict as exc:  # the client, with exist_ok, reads the existing repository's address from the answer
        repo = f"{body.get('organization')}/{body.get('name')}"
        return _error(exc.status, exc.message, url=request.build_absolute_uri(f"/{prefix}{repo}"))
    return JsonResponse(
        {"url": request.build_absolute_uri(f"/{prefix}{item.repo}"), "name": item.repo, "id": str(item.public_id)}
    )


@endpoint(write=True, methods=("DELETE",))
def delete_repo(request, user):
    """``delete_repo``: one of the caller's repositories, by ``organization`` (their own namespace when left out)
    and ``name``; a missing one, or someone else's, is not found."""
    body = _json_body(request)
    name, organization = body.get("name"), body.get("organization") or repos.user_namespace(user)
    kind = KINDS.get(body.get("type") or "model") if isinstance(body.get("type") or "model", str) else None
    if kind is None or not isinstance(name, str) or not isinstance(organization, str):
        raise ServiceError(_("Give the repository as namespace/name, e.g. demo/tiny."), code="invalid_repo_id")
    item = repos.writable(user, kind, f"{organization}/{name}")  # missing or private: not found; not theirs: 403
    services.delete_item(user, item.repo)
    return JsonResponse({})


@endpoint(write=True, methods=("PUT",))
def repo_settings(request, user, kind, repo):
    """``update_repo_settings``: the visibility (``private`` or ``visibility``) of one of the caller's
    repositories. Gating is not offered here and is refused rather than ignored."""
    body = _json_body(request)
    if body.get("gated") not in (None, False, "false"):
        raise ServiceError(_("Gated access is not offered on this hub."), code="invalid_gated")
    if "private" not in body and "visibility" not in body:
        raise ServiceError(_("Say what to change: private or visibility."), code="invalid_settings")
    item = repos.set_visibility(user, KINDS[kind], repo, _wants_private(body))
    return JsonResponse({"private": item.visibility == HubVisibility.PRIVATE, "visibility": item.visibility})


@endpoint(methods=("POST",))
def validate_yaml(request, user):
    """Check a README.md's front matter before it is committed (the client asks first)."""
    content = _json_body(request).get("content")
    try:
        cards.split(content if isinstance(content, str) else "")
    except ServiceError as exc:
        return JsonResponse({"errors": [{"message": exc.message}], "warnings": []}, status=400)
    return JsonResponse({"errors": [], "warnings": []})


@endpoint(write=True, methods=("POST",))
def preupload(request, user, kind, repo, revision):
    item = repos.writable(user, KINDS[kind], repo)
    return JsonResponse({"files": repos.preupload(item, _json_body(request).get("files"))})


@endpoint(write=True, methods=("POST",))
def commit(request, user, kind, repo, revision):
    limit = settings.HUB_MAX_COMMIT_BYTES + 1  # one line longer than a whole commit is refused, not read
    lines = iter(lambda: request.readline(limit), b"")
    made = repos.commit(user, KINDS[kind], repo, revision, lines)
    prefix = "" if made.item.kind == HubKind.MODEL else "datasets/"
    return JsonResponse(
        {
            "commitUrl": request.build_absolute_uri(f"/{prefix}{made.item.repo}/commit/{made.oid}"),
            "commitOid": made.oid,
            "commitMessage": made.summary,
            "pullRequestUrl": None,
        }
    )


@endpoint(write=True, methods=("POST",))
def lfs_batch(request, user, repo, prefix=""):
    body = _json_body(request)
    if body.get("operation") != "upload":
        raise ServiceError(_("Only uploads go through this batch API; download with resolve."), code="invalid_lfs")
    kind = HubKind.DATASET if prefix else HubKind.MODEL
    item = repos.writable(user, kind, repo)
    objects = repos.lfs_batch(
        user,
        item,
        body.get("objects"),
        upload_url=lambda oid: request.build_absolute_uri(reverse("hub-lfs-upload", args=[oid])),
        verify_url=lambda oid: request.build_absolute_uri(reverse("hub-lfs-verify", args=[oid])),
        token_id=getattr(request, "hub_token_id", None),
    )
    response = JsonResponse({"transfer": "basic", "objects": objects, "hash_algo": "sha256"})
    response["Content-Type"] = "application/vnd.git-lfs+json"
    return response


@csrf_exempt
def lfs_upload(request, oid):
    """The signed address an LFS upload goes to (its ticket is the permission, as a pre-signed S3 URL's is)."""
    if request.method != "PUT":
        return _error(405, _("Method not allowed."))
    try:
        repos.receive_lfs(oid, request.GET.get("ticket"), request.read)
    except ServiceError as exc:
        return _error(exc.status, exc.message)
    return HttpResponse(status=200)


@endpoint(write=True, methods=("POST",))
def lfs_verify(request, user, oid):
    body = _json_body(request)
    repos.verify_lfs(user, oid, body.get("size"))
    return JsonResponse({"oid": oid, "size": body.get("size")})


# --- Xet (huggingface_hub with hf_xet, its default) ------------------------------------------------------------


@endpoint(write=True)
def xet_write_token(request, user, kind, repo, revision):
    """A short-lived token for uploading a repository's files through the Xet protocol, with the CAS address."""
    item = repos.writable(user, KINDS[kind], repo)
    cas_url = request.build_absolute_uri(reverse("hub-xet-root")).rstrip("/")
    return JsonResponse(xet.write_token(user, item, getattr(request, "hub_token_id", None), cas_url))


def cas(methods):
    """Wrap a CAS view: the method, the Xet token's user, and errors as JSON."""

    def wrap(view):
        @csrf_exempt
        def run(request, *args, **kwargs):
            if request.method not in methods:
                return _error(405, _("Method not allowed."))
            try:
                user = xet.token_user(request.headers.get("Authorization", ""))
                return view(request, user, *args, **kwargs)
            except ServiceError as exc:
                return _error(401 if exc.code == "xet_token" else exc.status, exc.message)

        return run

    return wrap


@cas(("POST",))
def xet_xorb(request, user, prefix, xorb):
    if prefix != "default":
        return _error(400, _("Xorbs are uploaded under the prefix “default”."))
    inserted = xet.receive_xorb(user, xorb, request.read(xet.MAX_XORB_BYTES + 1))
    return JsonResponse({"was_inserted": inserted})


@cas(("POST",))
def xet_shard(request, user):
    xet.receive_shard(user, request.read(xet.MAX_SHARD_BYTES + 1))
    return JsonResponse({"result": 1})


@cas(("GET", "POST"))
def xet_not_offered(request, user, **kwargs):
    """Global deduplication queries and upload grants: not offered here, which the protocol answers with 404 (the
    client then uploads every new chunk, and posts each xorb itself)."""
    return _error(404, _("Not offered by this hub."))
