"""Hub API shapes. Decimals (parameters, prices) are strings, as everywhere in the API."""

from django.urls import reverse
from rest_framework import serializers

from core.api import strict
from instances.choices import Backend

from ..choices import HubKind, HubSort
from ..forms import MAX_FILTER_LENGTH, MAX_QUERY_LENGTH
from ..hub.search import HubQuery
from ..models import HubFile, HubItem


def _filter(help_text):
    return serializers.CharField(required=False, allow_blank=True, max_length=MAX_FILTER_LENGTH, help_text=help_text)


class HubSearchQuerySerializer(strict.Serializer):
    q = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=MAX_QUERY_LENGTH,
        help_text="Words in Chinese or English; every word must match (English words also as prefixes).",
    )
    kind = serializers.ChoiceField(choices=HubKind.choices, required=False)
    task = _filter("A pipeline tag, e.g. text-generation.")
    licence = _filter("A licence, e.g. Apache-2.0 (case and punctuation are ignored).")
    language = _filter("A language code, e.g. zh.")
    framework = _filter("A framework or library, e.g. mindspore or transformers.")
    chip = serializers.ChoiceField(choices=Backend.choices, required=False, help_text="A chip family.")
    tag = _filter("A tag, e.g. 对话.")
    sort = serializers.ChoiceField(choices=HubSort.choices, default=HubSort.MOUNTS)

    def hub_query(self) -> HubQuery:
        data = self.validated_data
        return HubQuery(**{name: data.get(name) or "" for name in HubQuery.__dataclass_fields__})


class HubItemSerializer(strict.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    # A plain string in the schema: an enum here would collide with storage's "kind" (file/folder) in the
    # generated component names.
    kind = serializers.CharField(read_only=True, help_text="model or dataset")
    visibility = serializers.CharField(read_only=True, help_text="public or private")
    parameters_b = serializers.DecimalField(max_digits=9, decimal_places=3, allow_null=True, read_only=True)
    mount_path = serializers.CharField(read_only=True)
    mine = serializers.SerializerMethodField(help_text="Whether the caller published this item.")
    url = serializers.SerializerMethodField(help_text="The item's page in the console.")
    metadata_only = serializers.SerializerMethodField(
        help_text="True for a catalogue entry whose files are not stored on this hub (mount it; it cannot be "
        "downloaded). Published repositories download through the Hugging Face Hub API at the console's root."
    )

    class Meta:
        model = HubItem
        fields = [
            "id",
            "repo",
            "kind",
            "summary",
            "summary_zh",
            "task",
            "licence",
            "library_name",
            "languages",
            "parameters_b",
            "size_bytes",
            "rows",
            "frameworks",
            "chips",
            "tags",
            "visibility",
            "mine",
            "mount_count",
            "likes_count",
            "mount_path",
            "url",
            "metadata_only",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def get_mine(self, item) -> bool:
        user = self.context["request"].user
        return bool(item.owner_id) and item.owner_id == getattr(user, "pk", None)

    def get_metadata_only(self, item) -> bool:
        return not item.has_bytes

    def get_url(self, item) -> str:
        path = reverse("marketplace:hub-item", kwargs={"org": item.org, "name": item.name})
        return self.context["request"].build_absolute_uri(path)


class HubFileSerializer(strict.ModelSerializer):
    class Meta:
        model = HubFile
        fields = ["path", "size_bytes"]


class HubChipPriceSerializer(strict.Serializer):
    family = serializers.CharField()
    chip = serializers.SlugField(source="chip.slug", allow_null=True, default=None)
    chip_name = serializers.CharField(source="chip.label", allow_null=True, default=None)
    per_card_hour = serializers.DecimalField(
        max_digits=24,
        decimal_places=6,
        allow_null=True,
        help_text="Pay-as-you-go CNY per card-hour after subsidies, from the quote function; null: not offered.",
    )


class HubItemDetailSerializer(HubItemSerializer):
    card = serializers.CharField(read_only=True, help_text="Markdown with YAML front matter.")
    card_html = serializers.CharField(read_only=True, help_text="The card body, rendered and sanitised.")
    files = HubFileSerializer(many=True, read_only=True, source="file_list")
    liked = serializers.BooleanField(read_only=True)
    chip_prices = HubChipPriceSerializer(many=True, read_only=True)

    class Meta(HubItemSerializer.Meta):
        fields = [*HubItemSerializer.Meta.fields, "card", "card_html", "files", "liked", "chip_prices"]
        read_only_fields = fields


class HubLikeSerializer(strict.Serializer):
    liked = serializers.BooleanField()
    likes_count = serializers.IntegerField()
