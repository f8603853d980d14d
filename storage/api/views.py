"""Cloud storage API: folders and files under /api/v1/storage/entries, and resumable uploads (tus 1.0.0) under
/api/v1/storage/uploads. Token auth for the CLI; session + X-CSRFToken for the browser's tus-js-client."""

import base64
import binascii
from urllib.parse import quote

from django.http import FileResponse, HttpResponse
from django.urls import reverse
from django.utils.http import content_disposition_header, http_date
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.errors import ErrorSerializer
from core.db import hand_back_connection
from core.errors import Conflict, ServiceError
from core.streaming import send_as_read
from teams.context import account_for

from .. import paths, quota, services
from ..models import Upload
from .serializers import ROOT_FOLDER, EntryChangeSerializer, EntrySerializer, FolderCreateSerializer, UsageSerializer

PATH_PARAM = OpenApiParameter(
    "path",
    {"type": "string", "format": paths.PATH_FORMAT},
    description=f"A folder or file path such as /datasets/raw; / is the root. {paths.PATH_RULES}",
)
NOTHING_AT_PATH = OpenApiResponse(description="No folder or file at that path.")
NAME_TAKEN = OpenApiResponse(description="Something of that name is already there.")


def download_response(request, entry, handle) -> FileResponse:
    """A streamed download; Django's Content-Disposition uses RFC 5987 ``filename*`` for Chinese names. It can take
    minutes and reads nothing from the database: the request's connection goes back first, and under ASGI the file
    is sent as it is read (``core.streaming``)."""
    hand_back_connection()  # before the response is made: on S3 making it may fetch the object
    content_type = entry.content_type or "application/octet-stream"
    if request.method == "HEAD":  # the headers alone: the file is not read
        handle.close()
        response = HttpResponse(content_type=content_type)
        response["Content-Disposition"] = content_disposition_header(True, entry.name)
    else:
        response = FileResponse(handle, as_attachment=True, filename=entry.name, content_type=content_type)
    response["Content-Length"] = str(entry.size)
    response["X-Content-Type-Options"] = "nosniff"
    return send_as_read(request, response)


class EntryViewSet(viewsets.GenericViewSet):
    """The caller's folders and files. A missing entry and someone else's answer the same 404."""

    team_scoped = True  # a team's token (or the console in a team's context) works in the team's folder

    serializer_class = EntrySerializer
    lookup_field = "public_id"
    lookup_value_regex = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"

    def get_queryset(self):
        return services.children(account_for(self.request), None)

    @extend_schema(parameters=[PATH_PARAM], responses={200: EntrySerializer(many=True), 404: NOTHING_AT_PATH})
    def list(self, request):
        """The contents of a folder: folders first, then files, by name."""
        folder = services.find_folder(account_for(request), request.query_params.get("path", "/"))
        page = self.paginate_queryset(services.children(account_for(request), folder))
        return self.get_paginated_response(EntrySerializer(page, many=True).data)

    def retrieve(self, request, public_id=None):
        return Response(EntrySerializer(services.get_entry(account_for(request), public_id)).data)

    @extend_schema(request=EntryChangeSerializer, responses={200: EntrySerializer, 409: NAME_TAKEN})
    def partial_update(self, request, public_id=None):
        """Rename (``name``), move (``folder``), or both at once."""
        body = EntryChangeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        if "folder" in data:
            entry = services.move(account_for(request), public_id, data["folder"], data.get("name"))
        elif "name" in data:
            entry = services.rename(account_for(request), public_id, data["name"])
        else:  # a PATCH that changes nothing (a form's fields sent empty are left out): the entry as it is
            entry = services.get_entry(account_for(request), public_id, "change")
        return Response(EntrySerializer(entry).data)

    @extend_schema(responses={204: None})
    def destroy(self, request, public_id=None):
        """Delete a file, or a folder and everything in it."""
        services.delete(account_for(request), public_id)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(responses={(200, "application/octet-stream"): OpenApiTypes.BINARY})
    @action(detail=True, methods=["get"])
    def download(self, request, public_id=None):
        """The file's bytes, streamed."""
        return download_response(request, *services.open_file(account_for(request), public_id))

    @extend_schema(parameters=[PATH_PARAM], responses={200: EntrySerializer, 404: NOTHING_AT_PATH})
    @action(detail=False, methods=["get"])
    def lookup(self, request):
        """The entry at a path (the root answers as a folder without an id)."""
        entry = services.find(account_for(request), request.query_params.get("path", "/"))
        if entry is None:
            return Response(ROOT_FOLDER)
        return Response(EntrySerializer(entry).data)


class FolderView(APIView):
    team_scoped = True  # a team's token (or the console in a team's context) works in the team's folder

    @extend_schema(request=FolderCreateSerializer, responses={201: EntrySerializer, 409: NAME_TAKEN})
    def post(self, request):
        """Create a folder; missing parent folders are created too. An existing folder is a 409."""
        body = FolderCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        path = paths.clean_path(body.validated_data["path"])
        if path == paths.ROOT:
            raise Conflict(_("The root folder always exists."), code="exists")
        parent_path, name = paths.split(path)
        parent = services.make_folders(account_for(request), parent_path)
        folder = services.create_folder(account_for(request), parent, name)
        return Response(EntrySerializer(folder).data, status=status.HTTP_201_CREATED)


class UsageView(APIView):
    team_scoped = True  # a team's token (or the console in a team's context) works in the team's folder

    @extend_schema(responses=UsageSerializer)
    def get(self, request):
        """Bytes used (files and published hub repositories) and reserved, the free tier and the ceiling."""
        usage = quota.usage(account_for(request))
        fields = ("used", "elsewhere", "reserved", "free", "maximum", "billable", "available")
        data = {k: getattr(usage, k) for k in fields}
        return Response(UsageSerializer(data).data)


# tus 1.0.0 --------------------------------------------------------------------------------------------------------

TUS_VERSION = "1.0.0"
# tus: every request but OPTIONS carries the protocol version, or is answered 412 Precondition Failed.
TUS_RESUMABLE = OpenApiParameter("Tus-Resumable", str, OpenApiParameter.HEADER, required=True, enum=[TUS_VERSION])
TUS_EXTENSIONS = "creation,termination"
WHOLE_BYTES = {"type": "integer", "minimum": 0}
UPLOAD_METADATA_FORMAT = "tus-upload-metadata"


class TusPreconditionFailed(ServiceError):
    status = 412
    code = "tus_version"


class TusView(APIView):
    """Shared tus behaviour: every response carries ``Tus-Resumable``; OPTIONS needs no login (tus discovery)."""

    team_scoped = True  # a team's token (or the console in a team's context) uploads into the team's folder

    def get_permissions(self):
        if self.request.method == "OPTIONS":
            return [AllowAny()]
        return super().get_permissions()

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        # A method this address does not answer is a 405 (DRF's, after this), whatever the tus header says.
        answered = request.method.lower() in self.http_method_names and hasattr(self, request.method.lower())
        if answered and request.method != "OPTIONS" and request.headers.get("Tus-Resumable") != TUS_VERSION:
            raise TusPreconditionFailed(_("This endpoint speaks the tus protocol: send “Tus-Resumable: 1.0.0”."))

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        response["Tus-Resumable"] = TUS_VERSION
        response["Cache-Control"] = "no-store"
        if response.status_code == 412:
            response["Tus-Version"] = TUS_VERSION
        return response

    @extend_schema(exclude=True)
    def options(self, request, *args, **kwargs):
        return Response(
            status=status.HTTP_204_NO_CONTENT,
            headers={
                "Tus-Version": TUS_VERSION,
                "Tus-Extension": TUS_EXTENSIONS,
                "Tus-Max-Size": str(quota.max_bytes()),
            },
        )


def _upload_headers(upload: Upload) -> dict:
    headers = {
        "Upload-Offset": str(upload.offset),
        "Upload-Length": str(upload.length),
        "Upload-Expires": http_date(services.upload_expires_at(upload).timestamp()),
    }
    if upload.entry is not None:
        # Headers are Latin-1: the final path (it may be "name (1).ext", or Chinese) travels percent-encoded.
        headers["Storage-Entry-Id"] = str(upload.entry.public_id)
        headers["Storage-Entry-Path"] = quote(upload.entry.path)
    return headers


def _metadata(header: str) -> dict[str, str]:
    """``Upload-Metadata: filename d29ybGQ=,folder Lw==`` → {"filename": "world", "folder": "/"}."""
    metadata = {}
    for pair in filter(None, (p.strip() for p in header.split(","))):
        key, _sep, value = pair.partition(" ")
        try:
            metadata[key] = base64.b64decode(value, validate=True).decode() if value else ""
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise ServiceError(_("Upload-Metadata is not valid base64 UTF-8."), code="invalid_metadata") from exc
    return metadata


def _header_int(request, name: str) -> int:
    raw = request.headers.get(name, "")
    if not raw.isdigit():
        raise ServiceError(_("%(header)s must be a whole number of bytes.") % {"header": name}, code="invalid_header")
    return int(raw)


upload_status = inline_serializer(
    "UploadStatus",
    {
        "id": serializers.UUIDField(),
        "filename": serializers.CharField(),
        "offset": serializers.IntegerField(),
        "length": serializers.IntegerField(),
        "status": serializers.CharField(),
        "entry": EntrySerializer(allow_null=True),
    },
)


def _upload_data(upload: Upload) -> dict:
    entry = EntrySerializer(upload.entry).data if upload.entry else None
    return {
        "id": str(upload.public_id),
        "filename": upload.filename,
        "offset": upload.offset,
        "length": upload.length,
        "status": upload.status,
        "entry": entry,
    }


class UploadCollectionView(TusView):
    @extend_schema(
        summary="Create a resumable upload (tus creation)",
        parameters=[
            TUS_RESUMABLE,
            OpenApiParameter(
                "Upload-Length",
                {**WHOLE_BYTES, "maximum": quota.max_bytes()},
                OpenApiParameter.HEADER,
                required=True,
                description="The size in bytes, at most the storage ceiling (the OPTIONS answer's Tus-Max-Size).",
            ),
            OpenApiParameter(
                "Upload-Metadata",
                {"type": "string", "format": UPLOAD_METADATA_FORMAT},
                OpenApiParameter.HEADER,
                required=True,
                description="tus metadata: comma-separated `key base64(value)` pairs — filename (required: a file "
                "name), folder (default /: a folder path), filetype.",
            ),
        ],
        request=None,
        responses={
            201: upload_status,
            402: OpenApiResponse(description="Past the free tier, and the cash balance cannot pay for it."),
            409: OpenApiResponse(ErrorSerializer, description="Not enough of the storage ceiling left for it."),
            413: OpenApiResponse(description="Larger than the storage ceiling (Tus-Max-Size)."),
        },
    )
    def post(self, request):
        if "Upload-Defer-Length" in request.headers:
            raise ServiceError(_("Declare the Upload-Length when creating the upload."), code="length_required")
        length = _header_int(request, "Upload-Length")
        metadata = _metadata(request.headers.get("Upload-Metadata", ""))
        try:
            upload = services.create_upload(
                account_for(request),
                folder_path=metadata.get("folder", "/"),
                filename=metadata.get("filename", metadata.get("name", "")),
                length=length,
                content_type=metadata.get("filetype", ""),
            )
        except quota.QuotaExceeded as exc:
            # Larger than the ceiling (Tus-Max-Size) the file is too large: 413, as tus says. One that fits the
            # ceiling but not what is left of it is refused for what is stored now: a conflict with that state.
            if length <= quota.max_bytes():
                exc.status = status.HTTP_409_CONFLICT
            raise
        location = reverse("api-storage-upload", kwargs={"public_id": upload.public_id})
        headers = _upload_headers(upload) | {"Location": location}
        return Response(_upload_data(upload), status=status.HTTP_201_CREATED, headers=headers)


class UploadView(TusView):
    @extend_schema(summary="Progress of an upload (JSON)", parameters=[TUS_RESUMABLE], responses=upload_status)
    def get(self, request, public_id):
        upload = services.get_upload(account_for(request), public_id)
        return Response(_upload_data(upload), headers=_upload_headers(upload))

    @extend_schema(summary="Offset of an upload (tus HEAD)", parameters=[TUS_RESUMABLE], responses={200: None})
    def head(self, request, public_id):
        upload = services.get_upload(account_for(request), public_id)
        return Response(status=status.HTTP_200_OK, headers=_upload_headers(upload))

    @extend_schema(
        summary="Append bytes (tus PATCH)",
        parameters=[
            OpenApiParameter("Upload-Offset", WHOLE_BYTES, OpenApiParameter.HEADER, required=True),
            TUS_RESUMABLE,
        ],
        request={"application/offset+octet-stream": OpenApiTypes.BINARY},
        responses={
            204: None,
            409: OpenApiResponse(description="Offset mismatch."),
            413: None,
            415: OpenApiResponse(ErrorSerializer, description="A chunk not sent as application/offset+octet-stream."),
            423: None,
        },
    )
    def patch(self, request, public_id):
        if request.content_type.split(";")[0].strip() != "application/offset+octet-stream":
            return Response(
                {"code": "unsupported_media_type", "message": _("Send chunks as application/offset+octet-stream.")},
                status=status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
            )
        offset = _header_int(request, "Upload-Offset")
        content_length = int(request.META.get("CONTENT_LENGTH") or 0)
        upload = services.write_chunk(
            account_for(request), public_id, offset=offset, stream=request.stream, content_length=content_length
        )
        return Response(status=status.HTTP_204_NO_CONTENT, headers=_upload_headers(upload))

    @extend_schema(summary="Cancel an upload (tus termination)", parameters=[TUS_RESUMABLE], responses={204: None})
    def delete(self, request, public_id):
        services.terminate_upload(account_for(request), public_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
