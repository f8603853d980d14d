"""``/api/v1/ssh-keys``: the caller's SSH public keys — list, add (POST), delete."""

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.response import Response

from core.api import strict
from core.api.schema import named_format
from core.api.validators import display_name

from .. import ssh_keys
from ..models import SSHKey


@named_format(ssh_keys.KEY_FORMAT)
class PublicKeyField(serializers.CharField):
    """An SSH public key's text: the schema names its format (checked by ``ssh_keys.parse_public_key``)."""


class SSHKeySerializer(strict.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    public_key = PublicKeyField(
        max_length=ssh_keys.MAX_KEY_TEXT,
        help_text="One public key in OpenSSH format (the contents of a .pub file): Ed25519, ECDSA, or RSA of 2048 "
        "bits or more.",
    )
    name = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=ssh_keys.MAX_NAME_LENGTH,
        validators=[display_name(ssh_keys.MAX_NAME_LENGTH, _("SSH key"))],
        help_text="Optional: the key's comment is used when empty.",
    )

    class Meta:
        model = SSHKey
        fields = ["id", "name", "key_type", "fingerprint", "public_key", "created_at", "last_used_at"]
        read_only_fields = ["id", "key_type", "fingerprint", "created_at", "last_used_at"]


class SSHKeyViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The caller's SSH keys, which log in to their running instances through the SSH gateway."""

    serializer_class = SSHKeySerializer
    lookup_field = "public_id"
    lookup_value_regex = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"

    def get_queryset(self):
        return SSHKey.objects.for_user(self.request.user)

    @extend_schema(request=SSHKeySerializer, responses={201: SSHKeySerializer})
    def create(self, request):
        serializer = SSHKeySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        key = ssh_keys.add_ssh_key(request.user, public_key=data["public_key"], name=data.get("name", ""))
        return Response(SSHKeySerializer(key).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request, public_id=None):
        ssh_keys.remove_ssh_key(request.user, self.kwargs["public_id"])
        return Response(status=status.HTTP_204_NO_CONTENT)
