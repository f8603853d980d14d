from django import forms
from django.utils.translation import gettext_lazy as _

from . import roles
from .roles import Role


class TeamForm(forms.Form):
    name = forms.CharField(label=_("Team name"), max_length=80)
    slug = forms.CharField(
        label=_("Short name"),
        max_length=40,
        help_text=_("Lower-case letters, digits and hyphens; used in addresses and in the CLI's --team."),
    )


class InvitationForm(forms.Form):
    email = forms.EmailField(label=_("E-mail address"), max_length=254)
    role = forms.ChoiceField(label=_("Role"), choices=Role.choices, initial=Role.DEVELOPER)

    def __init__(self, *args, member=None, **kwargs):
        super().__init__(*args, **kwargs)
        if member is not None and not roles.can(member.role, roles.OWN):
            self.fields["role"].choices = [(v, label) for v, label in Role.choices if v != Role.OWNER]
