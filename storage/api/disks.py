"""Cloud disks under /api/v1/disks and hub mounts under /api/v1/instances/{id}/mounts. Owners only: someone else's
disk or instance answers the same 404 as one that does not exist."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.services import get_zone
from core.api.errors import ErrorSerializer
from core.attaching import machines
from teams import roles
from teams.context import account_for

from .. import disks, mounts
from .serializers import (
    DiskAttachSerializer,
    DiskCreateSerializer,
    DiskGrowSerializer,
    DiskSerializer,
    MountCreateSerializer,
    MountSerializer,
)

ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="Bad input (size, name, zone, another zone's instance)."),
    404: OpenApiResponse(ErrorSerializer, description="No such disk or instance (or not yours)."),
    409: OpenApiResponse(ErrorSerializer, description="The disk is in use, or the instance's state forbids it."),
}
NO_FUNDS = OpenApiResponse(
    ErrorSerializer,
    description="The cash balance cannot carry the disk's first hour on top of what already runs, or is in arrears.",
)


@extend_schema(tags=["disks"])
class DiskViewSet(viewsets.GenericViewSet):
    """Your cloud disks (云硬盘): zone-bound, grow only, attached to one instance at a time, billed per GB-day."""

    serializer_class = DiskSerializer
    lookup_field = "public_id"
    lookup_url_kwarg = "id"
    lookup_value_regex = "[^/]+"

    team_scoped = True  # a team's token lists, creates and acts on the team's disks

    def get_queryset(self):
        return disks.account_disks(account_for(self.request, roles.VIEW))

    def _one(self, disk, code=status.HTTP_200_OK):
        return Response(DiskSerializer(disk, context={}).data, status=code)

    @extend_schema(summary="Your disks", responses=DiskSerializer(many=True))
    def list(self, request):
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(DiskSerializer(page, many=True, context={}).data)

    @extend_schema(
        summary="Create a disk (billed per GB-day until deleted)",
        request=DiskCreateSerializer,
        responses={201: DiskSerializer, 402: NO_FUNDS, **ERRORS},
    )
    def create(self, request):
        body = DiskCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        account = account_for(request, roles.OPERATE)
        zone = get_zone(data["zone"])
        disk = disks.create(account, name=data["name"], size_gb=data["size_gb"], zone=zone, by=request.user)
        return self._one(disk, status.HTTP_201_CREATED)

    @extend_schema(summary="A disk", responses={200: DiskSerializer, 404: ERRORS[404]})
    def retrieve(self, request, id=None):
        return self._one(disks.get_disk(request.user, id))

    @extend_schema(summary="Delete a detached disk", responses={204: None, **ERRORS})
    def destroy(self, request, id=None):
        disks.delete(request.user, id)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="Attach to an instance of the same zone (hot-plug when it runs)",
        request=DiskAttachSerializer,
        responses={200: DiskSerializer, **ERRORS},
    )
    @action(detail=True, methods=["post"])
    def attach(self, request, id=None):
        body = DiskAttachSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._one(disks.attach(request.user, id, body.validated_data["instance"]))

    @extend_schema(
        summary="Detach from its instance (hot-unplug when it runs)",
        request=None,
        responses={200: DiskSerializer, **ERRORS},
    )
    @action(detail=True, methods=["post"])
    def detach(self, request, id=None):
        return self._one(disks.detach(request.user, id))

    @extend_schema(
        summary="Grow (never shrink)",
        request=DiskGrowSerializer,
        responses={200: DiskSerializer, 402: NO_FUNDS, **ERRORS},
    )
    @action(detail=True, methods=["post"])
    def grow(self, request, id=None):
        body = DiskGrowSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._one(disks.grow(request.user, id, body.validated_data["size_gb"]))


def mount_rows(instance) -> list[dict]:
    """The instance's mounts as the API and the page list them: the owner's cloud storage first (``/root/shared``,
    a team's ``/root/shared-team``), then hub items."""
    target = machines().shared_target(instance)
    rows = [{"repo": "", "kind": "storage", "target": target, "read_only": False, "created_at": None}]
    rows += [
        {"repo": m.repo, "kind": m.kind, "target": m.target, "read_only": True, "created_at": m.created_at}
        for m in mounts.mounts_of(instance)
    ]
    return rows


@extend_schema(tags=["instances"])
class InstanceMountsView(APIView):
    team_scoped = True  # the ownership filter keeps a team's token to the team's instances

    @extend_schema(
        summary="An instance's mounts: /root/shared and hub items",
        responses={200: MountSerializer(many=True), 404: ERRORS[404]},
    )
    def get(self, request, id):
        instance = machines().get(request.user, id)
        return Response(MountSerializer(mount_rows(instance), many=True).data)

    @extend_schema(
        summary="Mount a hub model or dataset read-only (metadata, never a copy)",
        request=MountCreateSerializer,
        responses={201: MountSerializer, **ERRORS},
    )
    def post(self, request, id):
        instance = machines().get(request.user, id, "change")
        body = MountCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        made = mounts.mount(instance.owner, instance, body.validated_data["repo"])  # the owner's hub items
        row = {
            "repo": made.repo,
            "kind": made.kind,
            "target": made.target,
            "read_only": True,
            "created_at": made.created_at,
        }
        return Response(MountSerializer(row).data, status=status.HTTP_201_CREATED)


@extend_schema(tags=["instances"])
class InstanceMountView(APIView):
    team_scoped = True

    @extend_schema(summary="Unmount a hub item", responses={204: None, **ERRORS})
    def delete(self, request, id, org, name):
        instance = machines().get(request.user, id, "change")
        mounts.unmount(instance.owner, instance, f"{org}/{name}")
        return Response(status=status.HTTP_204_NO_CONTENT)
