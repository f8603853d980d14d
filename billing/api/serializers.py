import copy
from decimal import Decimal

from django.core import validators
from django.utils.translation import gettext_lazy as _
from drf_spectacular.extensions import OpenApiSerializerExtension, OpenApiSerializerFieldExtension
from rest_framework import serializers

from core.api import strict
from core.api.ranges import amounts, positive_numbers
from core.api.schema import EMPTY_VALUE, FLAG_SET
from core.api.validators import Pattern

from .. import payments, vouchers
from ..choices import TransactionKind
from ..money import AMOUNT_TEXT_MESSAGE, MONEY_DECIMAL_PLACES, RATE_DECIMAL_PLACES, is_plain_amount
from ..quote import MAX_CARDS, MAX_TERM_MINUTES, PAY_AS_YOU_GO
from ..rules import check_listing_date
from ..wallet import MAX_SPENDING_CAP


class AmountField(serializers.DecimalField):
    """A money amount: a JSON number, or a string written the one plain way (``money.is_plain_amount``), never
    "１００" or "1_000", which Decimal() alone would read. ``bounds`` (whole yuan, ``(low, high)`` or a function
    giving them, ``high`` None for no bound) is the range the service accepts, stated in the schema as the pattern
    of the texts in it (``AmountFieldSchema``); without it, ``min_value`` and ``max_value`` are."""

    def __init__(self, *args, bounds=None, **kwargs):
        self.bounds = bounds
        super().__init__(*args, **kwargs)

    def schema_bounds(self) -> tuple[Decimal, Decimal | None]:
        low, high = self.bounds() if callable(self.bounds) else (self.bounds or (self.min_value, self.max_value))
        return (low if low is not None else Decimal(0)), high

    def to_internal_value(self, data):
        if isinstance(data, str) and not is_plain_amount(data.strip()):
            raise serializers.ValidationError(AMOUNT_TEXT_MESSAGE, code="invalid")
        return super().to_internal_value(data)


class QuoteRequestSerializer(strict.Serializer):  # its rules across fields: QuoteRequestSchema
    """What to price: a spec, or a chip and cards (no chip and 0 cards: the no-card mode)."""

    spec = serializers.SlugField(required=False, help_text="An instance spec slug from /api/v1/specs.")
    chip = serializers.SlugField(required=False, allow_null=True, help_text="A chip slug; omit for no-card.")
    cards = serializers.IntegerField(required=False, min_value=0, max_value=MAX_CARDS)
    zone = serializers.SlugField(required=False, allow_null=True, help_text="Default: where the chip is offered.")
    plan = serializers.SlugField(default=PAY_AS_YOU_GO, help_text="payg, daily or monthly.")
    spot = serializers.BooleanField(default=False)
    minutes = serializers.IntegerField(required=False, min_value=1, max_value=MAX_TERM_MINUTES)
    hours = serializers.DecimalField(
        required=False,
        max_digits=12,
        decimal_places=4,
        min_value=Decimal("0.0001"),
        max_value=Decimal(MAX_TERM_MINUTES // 60),
        validators=[validators.RegexValidator(positive_numbers(MAX_TERM_MINUTES // 60, places=4))],
    )

    def validate(self, attrs):
        if "minutes" in attrs and "hours" in attrs:
            raise serializers.ValidationError({"hours": _("Give the term in minutes or in hours, not both.")})
        if attrs.get("spec") and (attrs.get("chip") or "cards" in attrs):
            raise serializers.ValidationError({"spec": _("Give a spec or a chip and cards, not both.")})
        return attrs


class ListingDate(validators.RegexValidator):
    """A filter date of this century (``rules.check_listing_date``), which the schema states as the pattern of its
    text: 20yy-mm-dd."""

    regex = r"^20[0-9]{2}-"

    def __call__(self, value):
        check_listing_date(value)


class AmountFieldSchema(OpenApiSerializerFieldExtension):
    """An amount in the schema: text in the accepted range, with at most the field's decimal places."""

    target_class = AmountField

    def map_serializer_field(self, auto_schema, direction):
        field = self.target
        low, high = field.schema_bounds()
        digits = field.max_digits - field.decimal_places
        pattern = amounts(low, high, places=field.decimal_places, whole_digits=digits)
        text = {"type": "string", "format": "decimal", "pattern": pattern}
        whole = {"type": "integer", "minimum": int(low), "maximum": int(high) if high is not None else 10**digits - 1}
        alternatives = [text, whole]  # a JSON number is taken too: a whole one is always written the plain way
        if field.allow_null:  # DRF reads an empty text as null there
            alternatives.append({"type": "string", "maxLength": 0})
        return {"anyOf": alternatives}


# Spot is offered on pay-as-you-go only: the plan left out, pay-as-you-go, or (in a form or a query) empty, which is
# the default plan. A rule of the schemas of every request that takes a plan and spot.
SPOT_ONLY_ON_PAY_AS_YOU_GO = {
    "anyOf": [
        {"not": {"required": ["spot"], "properties": {"spot": FLAG_SET}}},
        {"not": {"required": ["plan"]}},
        {"properties": {"plan": {"enum": [PAY_AS_YOU_GO]}}},
        {"properties": {"plan": EMPTY_VALUE}},
    ]
}


class QuoteRequestSchema(OpenApiSerializerExtension):
    """The quote request's rules across fields, which the view refuses with a 400: a spec or a chip and cards, not
    both; cards above 0 need a chip (none is the no-card mode); a term in minutes or in hours, not both; spot only
    on pay-as-you-go (the default plan)."""

    target_class = "billing.api.serializers.QuoteRequestSerializer"

    def map_serializer(self, auto_schema, direction):
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        if direction == "request":
            schema["allOf"] = [
                {"not": {"anyOf": [{"required": ["spec", "chip"]}, {"required": ["spec", "cards"]}]}},
                {"not": {"required": ["minutes", "hours"]}},
                {
                    "anyOf": [
                        {"not": {"required": ["cards"]}},
                        {"properties": {"cards": {"maximum": 0}}},
                        {"required": ["chip"], "properties": {"chip": {"type": "string"}}},
                    ]
                },
                copy.deepcopy(SPOT_ONLY_ON_PAY_AS_YOU_GO),  # the schema's hooks rewrite what they are given
            ]
        return schema


def _rate(**kwargs):
    return serializers.DecimalField(max_digits=24, decimal_places=RATE_DECIMAL_PLACES, **kwargs)


def _money(**kwargs):
    return serializers.DecimalField(max_digits=20, decimal_places=MONEY_DECIMAL_PLACES, **kwargs)


class ProgrammeSerializer(strict.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField(source="label")
    rate = serializers.DecimalField(max_digits=5, decimal_places=4)


class QuoteSerializer(strict.Serializer):
    """A price breakdown. Amounts are decimal strings in CNY; discounts are positive amounts taken off."""

    currency = serializers.CharField()
    chip = serializers.CharField(source="chip_slug", allow_null=True)
    cards = serializers.IntegerField()
    zone = serializers.CharField(source="zone_slug", allow_null=True)
    plan = serializers.CharField(source="plan_slug")
    spot = serializers.BooleanField()
    minutes = serializers.IntegerField()
    billed_minutes = serializers.IntegerField()
    price_effective_from = serializers.DateTimeField()
    list_per_card_hour = _rate()
    list_per_hour = _rate()
    plan_discount_per_hour = _rate()
    spot_discount_per_hour = _rate()
    subsidy_per_hour = _rate()
    payable_per_hour = _rate()
    payable_per_card_hour = _rate()
    payable_per_minute = _rate()
    list_total = _money()
    plan_discount_total = _money()
    spot_discount_total = _money()
    subsidy_total = _money()
    payable_total = _money()
    subsidy_programme = ProgrammeSerializer(source="programme", allow_null=True)
    subsidy_rate = serializers.DecimalField(max_digits=5, decimal_places=4)
    subsidy_limited = serializers.BooleanField()


class VoucherSerializer(strict.Serializer):
    """A voucher in the wallet: what is left of it, what it pays for and until when."""

    id = serializers.CharField()
    name = serializers.CharField()
    amount = _money()
    balance = _money()
    expires_at = serializers.DateTimeField()
    expired = serializers.BooleanField()
    covers = serializers.CharField()


class VoucherListSerializer(strict.Serializer):
    results = VoucherSerializer(many=True)


class VoucherRedeemSerializer(strict.Serializer):
    code = serializers.CharField(
        max_length=64,
        validators=[Pattern(vouchers.CODE_AS_TYPED, refuse=vouchers.check_code)],
        help_text="As printed, e.g. ABCD-EFGH-JKLM (case and dashes ignored).",
    )


class WalletSerializer(strict.Serializer):
    """The caller's wallet. Amounts are decimal strings in CNY."""

    currency = serializers.SerializerMethodField()
    cash = _money()
    trial = _money()
    trial_expires_at = serializers.DateTimeField(allow_null=True)
    voucher_balance = _money()
    vouchers = VoucherSerializer(many=True)
    compute_balance = _money()
    spending_cap = _money(allow_null=True)
    month_spent = _money()
    hourly_spend = _rate()

    def get_currency(self, obj) -> str:
        return "CNY"


class SpendingCapSerializer(strict.Serializer):
    spending_cap = AmountField(
        max_digits=12,
        decimal_places=2,
        min_value=Decimal("0"),
        bounds=(Decimal(0), MAX_SPENDING_CAP),
        allow_null=True,
        help_text="null (an empty field in a form): no cap.",
    )


class TransactionSerializer(strict.Serializer):
    id = serializers.UUIDField(source="public_id")
    kind = serializers.CharField()
    kind_display = serializers.CharField(source="get_kind_display")
    amount = _money(source="user_amount", help_text="Change to the wallet: negative for a charge.")
    subsidy = _money(source="subsidy_amount")
    minutes = serializers.IntegerField()
    reference = serializers.CharField()
    provider_reference = serializers.CharField()
    resource_id = serializers.UUIDField(allow_null=True)
    created_at = serializers.DateTimeField()


class TransactionFilterSerializer(strict.Serializer):
    kind = serializers.ChoiceField(choices=[], required=False)
    since = serializers.DateField(required=False, validators=[ListingDate()])
    until = serializers.DateField(required=False, validators=[ListingDate()])

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["kind"].choices = TransactionKind.values

    def validate(self, attrs):
        if attrs.get("since") and attrs.get("until") and attrs["since"] > attrs["until"]:
            raise serializers.ValidationError({"until": _("The end date must be on or after the start date.")})
        return attrs


class StatementLineSerializer(strict.Serializer):
    resource_id = serializers.UUIDField(allow_null=True)
    kind = serializers.CharField()
    label = serializers.CharField()
    chip = serializers.CharField()
    chip_name = serializers.CharField()
    cards = serializers.IntegerField()
    minutes = serializers.IntegerField()
    charged = _money()
    subsidy = _money()
    member = serializers.CharField(help_text="On a team's statement: the member whose use it was (their address).")


class MemberSpendSerializer(strict.Serializer):
    member = serializers.CharField(help_text="The member's address; empty for the team's own charges.")
    minutes = serializers.IntegerField()
    charged = _money()


class StatementSerializer(strict.Serializer):
    month = serializers.SerializerMethodField()
    currency = serializers.SerializerMethodField()
    lines = StatementLineSerializer(many=True)
    minutes = serializers.IntegerField()
    charged = _money()
    subsidy = _money()
    members = MemberSpendSerializer(many=True, help_text="A team's statement: the month's spend per member.")

    def get_month(self, obj) -> str:
        return f"{obj.month:%Y-%m}"

    def get_currency(self, obj) -> str:
        return "CNY"


class StatementRequestSerializer(strict.Serializer):
    month = serializers.RegexField(
        r"^20\d{2}-(0[1-9]|1[0-2])$",
        required=False,
        error_messages={"invalid": _("Give the month as YYYY-MM, e.g. 2026-03.")},
    )


class TopUpRequestSerializer(strict.Serializer):
    amount = AmountField(max_digits=12, decimal_places=2, bounds=payments.limits, help_text='CNY, e.g. "50.00".')


class TopUpSerializer(strict.Serializer):
    id = serializers.UUIDField(source="public_id")
    amount = _money()
    currency = serializers.SerializerMethodField()
    provider = serializers.CharField()
    status = serializers.CharField()
    checkout_url = serializers.CharField()
    created_at = serializers.DateTimeField()
    paid_at = serializers.DateTimeField(allow_null=True)

    def get_currency(self, obj) -> str:
        return "CNY"
