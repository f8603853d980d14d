"""The channel form of the settings page (the API takes the same fields through its serializer)."""

from django import forms
from django.utils.translation import gettext_lazy as _

from billing.choices import NotificationKind

from .choices import ChannelKind
from .services import ChannelSpec


class ChannelForm(forms.Form):
    kind = forms.ChoiceField(label=_("Kind"), choices=ChannelKind.choices, initial=ChannelKind.WEBHOOK)
    name = forms.CharField(label=_("Name"), max_length=80, help_text=_("For you: e.g. “on-call group”."))
    url = forms.URLField(
        label=_("URL"),
        required=False,
        max_length=500,
        assume_scheme="https",
        help_text=_("The robot's webhook address, or your endpoint's. HTTPS, on a public address."),
    )
    email = forms.EmailField(label=_("E-mail address"), required=False, help_text=_("For an e-mail channel."))
    secret = forms.CharField(
        label=_("Secret"),
        required=False,
        max_length=200,
        widget=forms.PasswordInput(render_value=False),
        help_text=_(
            "Signs each delivery: required for a signed webhook, the “SEC…” key of a DingTalk robot or the key of a "
            "Feishu bot in signed mode. Leave empty to keep the saved one."
        ),
    )
    events = forms.MultipleChoiceField(
        label=_("Events"),
        required=False,
        choices=NotificationKind.choices,
        widget=forms.CheckboxSelectMultiple,
        help_text=_("None ticked: every event."),
    )
    enabled = forms.BooleanField(label=_("Enabled"), required=False, initial=True)

    def spec(self, *, keep_secret: bool) -> ChannelSpec:
        data = self.cleaned_data
        secret = data["secret"] or (None if keep_secret else "")
        return ChannelSpec(
            kind=data["kind"],
            name=data["name"],
            url=data["url"],
            email=data["email"],
            secret=secret,
            events=tuple(data["events"]),
            enabled=data["enabled"],
        )

    @classmethod
    def for_channel(cls, channel):
        return cls(
            initial={
                "kind": channel.kind,
                "name": channel.name,
                "url": channel.url,
                "email": channel.email,
                "events": channel.events,
                "enabled": channel.enabled,
            }
        )
