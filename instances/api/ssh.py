"""``/api/v1/instances/{id}/ssh``: the command that logs in to a running instance (``gpucloud ssh`` runs it)."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import strict
from core.api.errors import ErrorSerializer
from instances import lifecycle

from ..ssh_access import require_ssh_access


class SSHAccessSerializer(strict.Serializer):
    host = serializers.CharField(help_text="The SSH gateway's host name.")
    port = serializers.IntegerField(help_text="The SSH gateway's port.")
    user = serializers.CharField(help_text="The SSH user name: the instance's id.")
    command = serializers.CharField(help_text="The whole command, e.g. `ssh -p 2222 <id>@<host>`.")


class InstanceSSHView(APIView):
    team_scoped = True  # the ownership filter keeps a team's token to the team's instances

    @extend_schema(
        tags=["instances"],
        summary="How to log in to a running instance over SSH",
        responses={
            200: SSHAccessSerializer,
            409: OpenApiResponse(ErrorSerializer, description="The instance cannot be entered now, and why."),
        },
    )
    def get(self, request, id):
        # The gateway lets in the keys of those who may operate the instance: a read-only member gets the 403.
        instance = lifecycle.get_instance(request.user, id, "change")
        access = require_ssh_access(instance, request.get_host())
        return Response(SSHAccessSerializer(access).data)
