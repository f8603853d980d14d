"""Image marketplace endpoints: list/search/detail without logging in; clone, publish, rate and save an instance as
an image with a read-write token or a session; review for staff. Decimals (prices, ratings) are strings."""

from django.urls import reverse
from django.utils.translation import gettext_lazy
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api.permissions import PersonalTokenPermission, TokenScopePermission
from accounts.ops.audit import client_ip
from billing.quote import load_price_book
from core.api import strict
from core.api.pagination import LimitOffsetPagination
from core.api.schema import named_format
from core.api.validators import display_name
from instances.api.serializers import BootOptionsSerializer, LaunchedInstanceSerializer
from instances.choices import Backend
from storage import paths
from storage.api.serializers import PathField
from teams import roles as team_roles
from teams.context import acting
from teams.models import TeamEvent
from teams.services import record

from ..choices import ImageCategory, ImageSort, OperatingSystem
from ..images import clone, imports, references, services
from ..images.forms import MAX_FILTER_LENGTH, MAX_QUERY_LENGTH
from ..images.search import ImageQuery
from ..models import Image, ImageImport, ImageRating, ImageVariant

# Serializers ------------------------------------------------------------------------------------------------


class ImageQuerySerializer(strict.Serializer):
    q = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=MAX_QUERY_LENGTH,
        help_text="Words in Chinese or English (昇腾, 大模型, pytorch); every word must match.",
    )
    category = serializers.ChoiceField(choices=ImageCategory.choices, required=False)
    backend = serializers.ChoiceField(
        choices=[*Backend.choices, ("cpu", "CPU only")], required=False, help_text="Images with a variant for it."
    )
    chip = serializers.SlugField(required=False, help_text="A chip slug: images with a variant for its family.")
    framework = serializers.CharField(required=False, allow_blank=True, max_length=MAX_FILTER_LENGTH)
    os = serializers.ChoiceField(choices=OperatingSystem.choices, required=False)
    tag = serializers.CharField(required=False, allow_blank=True, max_length=MAX_FILTER_LENGTH)
    sort = serializers.ChoiceField(choices=ImageSort.choices, default=ImageSort.POPULAR)
    mine = serializers.BooleanField(required=False, default=False, help_text="Only your own images.")

    def image_query(self) -> ImageQuery:
        data = self.validated_data
        family = services.family_of_chip(data["chip"]) if data.get("chip") else data.get("backend", "")
        values = {name: data.get(name) or "" for name in ("q", "category", "framework", "os", "tag")}
        return ImageQuery(family=family, **values)


class ImageVariantSerializer(strict.ModelSerializer):
    family = serializers.CharField(help_text="npu, mlu, dcu, cuda, or empty for CPU only (the no-card mode).")

    class Meta:
        model = ImageVariant
        fields = ["slug", "family", "os", "stack", "size_bytes"]
        read_only_fields = fields


class ImageImportSerializer(strict.ModelSerializer):
    step = serializers.CharField(read_only=True, help_text="queued, copying, unpacking, checking or done")
    config = serializers.JSONField(
        read_only=True, help_text="The image's entrypoint, cmd, env, working_dir, user and exposed_ports."
    )
    checks = serializers.JSONField(
        read_only=True,
        help_text="shell (bool), python and jupyterlab (their paths, or empty), families and family (suggested).",
    )

    class Meta:
        model = ImageImport
        fields = [
            "reference",
            "archive",
            "digest",
            "step",
            "config",
            "checks",
            "family_confirmed",
            "created_at",
            "finished_at",
        ]
        read_only_fields = fields


@named_format(references.REFERENCE_FORMAT, references.REFERENCE_RULES)
class ReferenceField(serializers.CharField):
    """An image reference (``references.parse`` checks it)."""


class ImportSerializer(strict.Serializer):
    reference = ReferenceField(max_length=references.MAX_REFERENCE, help_text=references.REFERENCE_RULES)
    username = serializers.CharField(required=False, allow_blank=True, max_length=imports.MAX_CREDENTIAL)
    password = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=imports.MAX_CREDENTIAL,
        write_only=True,
        help_text="The registry password or token: stored encrypted, never shown again.",
    )
    name = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=services.MAX_NAME,
        validators=[display_name(services.MAX_NAME, gettext_lazy("image"))],
    )


class ImportArchiveSerializer(strict.Serializer):
    archive = PathField(
        max_length=paths.MAX_PATH_BYTES,
        trim_whitespace=False,
        help_text="The path of a `docker save` tar or an OCI layout tar in the account's cloud storage.",
    )
    name = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=services.MAX_NAME,
        validators=[display_name(services.MAX_NAME, gettext_lazy("image"))],
    )


class ImageFamilySerializer(strict.Serializer):
    family = serializers.ChoiceField(
        choices=["", *Backend.values],
        allow_blank=True,
        required=False,
        help_text="The chip family an imported image is for (npu, mlu, dcu, cuda; empty: CPU only). Left out: the "
        "one it has now (at first, the one its libraries suggest) is confirmed. Launching it on another family's "
        "card is warned about, not refused.",
    )


class ImageSerializer(strict.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    category = serializers.CharField(read_only=True, help_text="xinchuang, framework, case_study or community")
    review_state = serializers.CharField(read_only=True, help_text="draft, pending, listed or rejected")
    status = serializers.CharField(read_only=True, help_text="saving, importing, ready or failed")
    status_detail = serializers.CharField(read_only=True, help_text="Why it failed, when it did.")
    imported = ImageImportSerializer(
        read_only=True, allow_null=True, default=None, help_text="Where an imported image came from and what it holds."
    )
    rating_average = serializers.DecimalField(max_digits=3, decimal_places=2, read_only=True)
    variants = ImageVariantSerializer(many=True, read_only=True)
    mine = serializers.SerializerMethodField(help_text="Whether the caller owns this image.")
    url = serializers.SerializerMethodField(help_text="The image's page in the console.")

    class Meta:
        model = Image
        fields = [
            "id",
            "slug",
            "name",
            "name_zh",
            "summary",
            "summary_zh",
            "publisher",
            "category",
            "tags",
            "frameworks",
            "size_bytes",
            "usage_count",
            "rating_average",
            "rating_count",
            "review_state",
            "status",
            "status_detail",
            "imported",
            "mine",
            "variants",
            "url",
            "created_at",
        ]
        read_only_fields = fields

    def get_mine(self, image) -> bool:
        """Whether the image is the caller's own, or (in a team's context or through its token) the team's."""
        request = self.context["request"]
        if not image.owner_id or not request.user.is_authenticated:
            return False
        return image.owner_id in {request.user.pk, acting(request).account.pk}

    def get_url(self, image) -> str:
        return self.context["request"].build_absolute_uri(image.get_absolute_url())


class ChipOfferSerializer(strict.Serializer):
    family = serializers.CharField(source="variant.family")
    variant = serializers.CharField(source="variant.slug")
    chip = serializers.SlugField(source="chip.slug", allow_null=True, default=None)
    chip_name = serializers.CharField(source="chip.label", allow_null=True, default=None)
    list_per_card_hour = serializers.DecimalField(max_digits=24, decimal_places=6, allow_null=True)
    per_card_hour = serializers.DecimalField(
        max_digits=24,
        decimal_places=6,
        allow_null=True,
        help_text="Pay-as-you-go CNY per card-hour after subsidies, from the quote function; null: not offered.",
    )
    free_cards = serializers.IntegerField()


class ImageDetailSerializer(ImageSerializer):
    description = serializers.CharField(read_only=True, help_text="Markdown.")
    description_html = serializers.CharField(read_only=True, help_text="The description, rendered and sanitised.")
    description_zh = serializers.CharField(
        read_only=True, help_text="The description in Chinese (Markdown); empty when the image has only one."
    )
    description_zh_html = serializers.CharField(read_only=True, help_text="The Chinese description, rendered.")
    review_reason = serializers.CharField(read_only=True, help_text="Why staff rejected it (shown to the author).")
    offers = ChipOfferSerializer(many=True, read_only=True, help_text="Where each variant runs, priced live.")
    launch_url = serializers.CharField(read_only=True, allow_null=True, help_text="The prefilled launch wizard.")

    class Meta(ImageSerializer.Meta):
        fields = [
            *ImageSerializer.Meta.fields,
            "description",
            "description_html",
            "description_zh",
            "description_zh_html",
            "review_reason",
            "offers",
            "launch_url",
        ]
        read_only_fields = fields


class CloneSerializer(BootOptionsSerializer):
    """The boot options (start command, variables, secrets) are a launched clone's, as for POST /api/v1/instances;
    a copy into your images ignores them."""

    target = serializers.ChoiceField(
        choices=[("instance", "instance"), ("my_images", "my_images")],
        default="instance",
        help_text="instance: launch it on the cheapest compatible chip with free cards (one-click clone); "
        "my_images: a private copy you can launch, describe and publish.",
    )
    name = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=64,
        validators=[display_name(64, gettext_lazy("instance"))],
        help_text="The new name.",
    )


class SaveInstanceSerializer(strict.Serializer):
    instance = serializers.CharField(help_text="The id of one of your stopped instances.")
    name = serializers.CharField(
        max_length=services.MAX_NAME, validators=[display_name(services.MAX_NAME, gettext_lazy("image"))]
    )
    description = serializers.CharField(required=False, allow_blank=True, max_length=services.MAX_DESCRIPTION)


class RatingSerializer(strict.ModelSerializer):
    stars = serializers.IntegerField(min_value=1, max_value=5)
    comment = serializers.CharField(required=False, allow_blank=True, max_length=services.MAX_COMMENT, default="")

    class Meta:
        model = ImageRating
        fields = ["stars", "comment", "updated_at"]
        read_only_fields = ["updated_at"]


class ReviewSerializer(strict.Serializer):
    approve = serializers.BooleanField()
    reason = serializers.CharField(required=False, allow_blank=True, max_length=services.MAX_REASON, default="")


ERRORS = {
    400: OpenApiResponse(description="Bad input: {code, message, errors}."),
    403: OpenApiResponse(description="Not allowed (e.g. rating an image you never ran)."),
    404: OpenApiResponse(description="No such image (or someone else's private one)."),
    409: OpenApiResponse(description="The image's or instance's state does not allow this."),
}


# Views ------------------------------------------------------------------------------------------------------


class ImagePagination(LimitOffsetPagination):
    default_limit = 24
    max_limit = 100


PAGED_IMAGES = inline_serializer(
    "PaginatedImageList",
    fields={
        "count": serializers.IntegerField(),
        "next": serializers.URLField(allow_null=True),
        "previous": serializers.URLField(allow_null=True),
        "results": ImageSerializer(many=True),
    },
)


class ImageListView(APIView):
    permission_classes = [AllowAny, TokenScopePermission]
    team_scoped = True  # a team's token lists the team's images (mine=true) and saves the team's instances

    def get_permissions(self):
        if self.request.method == "POST":
            return [IsAuthenticated(), TokenScopePermission()]
        return super().get_permissions()

    @extend_schema(
        tags=["images"],
        parameters=[ImageQuerySerializer],
        responses={200: PAGED_IMAGES},
        operation_id="images_list",
        summary="Browse and search images",
        description="Listed images for everyone, plus the caller's own. Chinese (昇腾) and English (pytorch) words.",
    )
    def get(self, request):
        query = ImageQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        mine = query.validated_data["mine"]
        account = acting(request).account if mine and request.user.is_authenticated else None
        images = services.search_images(
            request.user, query.image_query(), query.validated_data["sort"], mine=mine, account=account
        )
        paginator = ImagePagination()
        page = paginator.paginate_queryset(images, request, view=self)
        return paginator.get_paginated_response(ImageSerializer(page, many=True, context={"request": request}).data)

    @extend_schema(
        tags=["images"],
        request=SaveInstanceSerializer,
        responses={201: ImageDetailSerializer, **ERRORS},
        summary="Save a stopped instance as a private image",
        description="The image is `saving` until the system disk is snapshotted (poll it), then `ready`.",
    )
    def post(self, request):
        body = SaveInstanceSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        image = services.save_instance_as_image(
            request.user, data["instance"], name=data["name"], description=data.get("description", "")
        )
        return Response(_detail(request, image), status=status.HTTP_201_CREATED)


class ImageImportView(APIView):
    permission_classes = [IsAuthenticated, TokenScopePermission]
    team_scoped = True  # a team's token (or a member in the team's context) imports the team's image

    @extend_schema(
        tags=["images"],
        request=ImportSerializer,
        responses={201: ImageDetailSerializer, **ERRORS},
        summary="Import a container image from a registry as a private image",
        description="The image is `importing` (see `imported.step`) until it is copied, unpacked and checked, then "
        "`ready`, or `failed` with `status_detail`. Registries on private addresses are refused.",
    )
    def post(self, request):
        body = ImportSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        context = acting(request)
        context.require(team_roles.OPERATE)  # a team's read-only and billing members import nothing into it
        image = imports.start_import(
            request.user,
            data["reference"],
            username=data.get("username", ""),
            password=data.get("password", ""),
            name=data.get("name", ""),
            owner=context.account,
        )
        return Response(_detail(request, image), status=status.HTTP_201_CREATED)


class ImageArchiveImportView(APIView):
    permission_classes = [IsAuthenticated, TokenScopePermission]
    team_scoped = True  # a team's token (or a member in the team's context) imports from the team's storage

    @extend_schema(
        tags=["images"],
        request=ImportArchiveSerializer,
        responses={201: ImageDetailSerializer, **ERRORS},
        summary="Import a container image from an archive in your cloud storage as a private image",
        description="`archive` is the path of a `docker save` tar or an OCI layout tar uploaded to the account's "
        "cloud storage (its format is read from its content). The image is `importing` until it is copied, unpacked "
        "and checked, then `ready`, or `failed` with `status_detail`.",
    )
    def post(self, request):
        body = ImportArchiveSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        context = acting(request)
        context.require(team_roles.OPERATE)
        data = body.validated_data
        image = imports.start_import(
            request.user, archive=data["archive"], name=data.get("name", ""), owner=context.account
        )
        return Response(_detail(request, image), status=status.HTTP_201_CREATED)


def _detail(request, image, *, reload: bool = True) -> dict:
    """The image's detail, read again as ``request.user`` sees it (``reload=False``: as it is, e.g. an image the
    reviewer just rejected, which they no longer see)."""
    if reload:
        image = services.get_image(request.user, image.public_id)
    image.offers = services.chip_offers(image, load_price_book(user=request.user))
    image.launch_url = clone.launch_url(image, image.offers) if image.is_ready else None
    if image.launch_url:
        image.launch_url = request.build_absolute_uri(image.launch_url)
    return ImageDetailSerializer(image, context={"request": request}).data


class ImageDetailView(APIView):
    permission_classes = [AllowAny, PersonalTokenPermission]
    team_scoped = True  # a team's token reads the team's images (the ownership filter keeps it to them)

    def get_permissions(self):
        if self.request.method in ("DELETE", "PATCH"):
            return [IsAuthenticated(), TokenScopePermission()]
        return super().get_permissions()

    @extend_schema(tags=["images"], responses={200: ImageDetailSerializer, 404: ERRORS[404]}, summary="One image")
    def get(self, request, key):
        return Response(_detail(request, services.get_image(request.user, key)))

    @extend_schema(
        tags=["images"], request=None, responses={204: None, **ERRORS}, summary="Remove one of your imported images"
    )
    def delete(self, request, key):
        imports.remove_image(request.user, services.get_image(request.user, key, action="delete"))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        tags=["images"],
        request=ImageFamilySerializer,
        responses={200: ImageDetailSerializer, **ERRORS},
        summary="Confirm or correct the chip family of one of your imported images",
    )
    def patch(self, request, key):
        body = ImageFamilySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        image = services.get_image(request.user, key, action="change")
        family = body.validated_data.get("family")
        imports.confirm_family(request.user, image, imports.image_family(image) if family is None else family)
        return Response(_detail(request, image))


class ImageCloneView(APIView):
    permission_classes = [IsAuthenticated, TokenScopePermission]

    @extend_schema(
        tags=["images"],
        request=CloneSerializer,
        responses={
            201: OpenApiResponse(description="The instance or the private image."),
            402: OpenApiResponse(description="Not enough balance."),
            **ERRORS,
        },
        summary="One-click clone: launch the image on the cheapest compatible chip, or copy it into your images",
    )
    def post(self, request, key):
        body = CloneSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        name = body.validated_data.get("name", "")
        if body.validated_data["target"] == "my_images":
            copy = services.clone_to_mine(request.user, services.get_image(request.user, key), name)
            return Response({"image": _detail(request, copy)}, status=status.HTTP_201_CREATED)
        boot = {field: body.validated_data[field] for field in ("start_command", "env", "secrets")}
        instance = clone.clone_and_launch(request.user, key, name=name, **boot)
        record(instance, request.user, TeamEvent.Action.LAUNCHED, subject=instance.name)
        data = LaunchedInstanceSerializer(instance, context={"request": request}).data
        location = reverse("api-instance-detail", args=[instance.public_id])
        return Response({"instance": data}, status=status.HTTP_201_CREATED, headers={"Location": location})


class ImagePublishView(APIView):
    permission_classes = [IsAuthenticated, TokenScopePermission]

    @extend_schema(
        tags=["images"],
        request=None,
        responses={200: ImageDetailSerializer, **ERRORS},
        summary="Submit one of your images for review (listed once staff approve it)",
    )
    def post(self, request, key):
        image = services.publish(request.user, services.get_image(request.user, key, action="change"))
        return Response(_detail(request, image))


class ImageRatingView(APIView):
    permission_classes = [IsAuthenticated, TokenScopePermission]

    @extend_schema(
        tags=["images"],
        request=RatingSerializer,
        responses={200: RatingSerializer, **ERRORS},
        summary="Rate an image you ran (1–5 stars with a comment; a new rating replaces yours)",
    )
    def post(self, request, key):
        body = RatingSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        image = services.get_image(request.user, key)
        rating = services.rate(request.user, image, body.validated_data["stars"], body.validated_data["comment"])
        return Response(RatingSerializer(rating).data)


class ImageReviewView(APIView):
    permission_classes = [IsAuthenticated, TokenScopePermission]

    @extend_schema(
        tags=["images"],
        request=ReviewSerializer,
        responses={200: ImageDetailSerializer, **ERRORS},
        summary="Staff: list or reject an image waiting for review",
    )
    def post(self, request, key):
        body = ReviewSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        image = services.get_image(request.user, key)
        image = services.review_image(
            image, body.validated_data["approve"], body.validated_data["reason"], request.user, ip=client_ip(request)
        )
        return Response(_detail(request, image, reload=False))
