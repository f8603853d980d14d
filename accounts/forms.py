"""Console forms."""

from django import forms
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from .models import ApiToken


class ApiTokenForm(forms.Form):
    name = forms.CharField(
        label=_("Name"),
        max_length=64,
        help_text=_("Where the token is used, e.g. “laptop CLI” or “CI pipeline”."),
        error_messages={"required": _("Give the token a name.")},
    )
    scope = forms.ChoiceField(
        label=_("Scope"),
        choices=ApiToken.Scope.choices,
        initial=ApiToken.Scope.READ,
        widget=forms.RadioSelect,
        error_messages={"invalid_choice": _("Choose read or read and write.")},
    )

    team = forms.ChoiceField(
        label=pgettext_lazy("api token", "For"),
        required=False,
        help_text=_(
            "A team's token acts in that team (its instances, disks, storage, endpoints, images and wallet, "
            "as your role allows) and reaches nothing personal."
        ),
        error_messages={"invalid_choice": _("Choose yourself or one of your teams.")},
    )

    def __init__(self, *args, teams=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].choices = [("", _("Me (personal)")), *((t.slug, t.name) for t in teams)]
        if not teams:
            self.fields["team"].widget = forms.HiddenInput()

    def clean_name(self):
        name = self.cleaned_data["name"].strip()
        if not name:
            raise forms.ValidationError(_("Give the token a name."))
        return name


class EnterpriseVerificationForm(forms.Form):
    company_name = forms.CharField(
        label=_("Company name"), max_length=200, error_messages={"required": _("Enter the company name.")}
    )
    licence_number = forms.CharField(
        label=_("Unified social credit code"),
        max_length=24,
        help_text=_("The 18-character unified social credit code on the business licence."),
        error_messages={"required": _("Enter the unified social credit code.")},
    )
    contact_name = forms.CharField(
        label=_("Contact person"), max_length=100, error_messages={"required": _("Enter a contact person.")}
    )
    contact_phone = forms.CharField(
        label=_("Contact phone"), max_length=32, error_messages={"required": _("Enter a contact phone number.")}
    )


class SSHKeyForm(forms.Form):
    """The fields are only collected here: ``accounts.ssh_keys.add_ssh_key`` checks the key and the name."""

    public_key = forms.CharField(
        label=_("Public key"),
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false", "placeholder": "ssh-ed25519 AAAA… you@laptop"}),
        help_text=_("The contents of your .pub file, e.g. ~/.ssh/id_ed25519.pub. Never paste a private key."),
        error_messages={"required": _("Paste a public key (the contents of a .pub file).")},
    )
    name = forms.CharField(
        label=_("Name"),
        required=False,
        max_length=100,
        help_text=_("Optional: the key's comment (e.g. you@laptop) is used when empty."),
    )


class RealNameForm(forms.Form):
    real_name = forms.CharField(
        label=pgettext_lazy("person", "Name"),
        max_length=60,
        error_messages={"required": _("Enter your name as it is on your ID card.")},
    )
    number = forms.CharField(
        label=_("ID number"),
        max_length=30,
        help_text=_("The 18 characters on your mainland resident identity card. Only its last four are kept."),
        error_messages={"required": _("Enter your ID number.")},
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )


class StudentAddressForm(forms.Form):
    email = forms.CharField(
        label=_("University address"),
        max_length=254,
        help_text=_("Your mailbox at a university in mainland China: it ends in .edu.cn."),
        error_messages={"required": _("Enter your university address.")},
        widget=forms.EmailInput(attrs={"autocomplete": "email", "placeholder": "name@pku.edu.cn"}),
    )


class StudentCodeForm(forms.Form):
    code = forms.CharField(
        label=_("Code"),
        max_length=12,
        help_text=_("The six digits in the mail we sent."),
        error_messages={"required": _("Enter the code from the mail.")},
        widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "inputmode": "numeric"}),
    )
