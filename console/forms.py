"""Console forms."""

from django import forms
from django.utils.translation import gettext_lazy as _

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

    def clean_name(self):
        name = self.cleaned_data["name"].strip()
        if not name:
            raise forms.ValidationError(_("Give the token a name."))
        return name
