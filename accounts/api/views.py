"""Account endpoints: who am I, and API token management."""

from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import NotFound
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from teams.services import team_for_token

from .. import services
from ..models import ApiToken
from .serializers import ApiTokenSerializer, IssuedTokenSerializer, MeSerializer


class MeView(APIView):
    @extend_schema(responses=MeSerializer)
    def get(self, request):
        return Response(MeSerializer(request.user, context={"request": request}).data)


class ApiTokenViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The caller's API tokens. Creating returns the secret once; deleting revokes."""

    serializer_class = ApiTokenSerializer
    lookup_field = "public_id"
    lookup_value_regex = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"

    def get_queryset(self):
        return ApiToken.objects.for_user(self.request.user).order_by("-created_at")

    @extend_schema(request=ApiTokenSerializer, responses={201: IssuedTokenSerializer})
    def create(self, request):
        serializer = ApiTokenSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        scope = data.get("scope", ApiToken.Scope.READ)
        team = team_for_token(request.user, data.get("team"))
        issued = services.create_api_token(request.user, name=data["name"], scope=scope, team=team)
        data = IssuedTokenSerializer(issued.token).data | {"token": issued.plaintext}
        return Response(data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: ApiTokenSerializer})
    def destroy(self, request, public_id=None):
        token = services.revoke_api_token(request.user, self.kwargs["public_id"])
        return Response(ApiTokenSerializer(token).data)


@extend_schema(exclude=True)
@api_view(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
@permission_classes([AllowAny])
def not_found(request, unknown=None):
    raise NotFound(_("No API endpoint at this address."))
