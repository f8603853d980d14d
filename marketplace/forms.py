"""The hub's search and filter form (a GET form: the URL always reflects the filters)."""

from django import forms
from django.utils.translation import gettext_lazy as _

from instances.choices import Backend

from .choices import HubKind, HubSort
from .hub.search import HubQuery

MAX_QUERY_LENGTH = 200
MAX_FILTER_LENGTH = 100


def _filter(label):
    # Menus offer the common values; any value is accepted, so links and the API can filter by rarer ones.
    return forms.CharField(label=label, required=False, max_length=MAX_FILTER_LENGTH, strip=True)


class HubSearchForm(forms.Form):
    q = forms.CharField(label=_("Search"), required=False, max_length=MAX_QUERY_LENGTH, strip=True)
    kind = forms.ChoiceField(
        label=_("Kind"), required=False, choices=[("", _("Models and datasets")), *HubKind.choices]
    )
    task = _filter(_("Task"))
    licence = _filter(_("Licence"))
    language = _filter(_("Language"))
    framework = _filter(_("Framework"))
    chip = forms.ChoiceField(label=_("Chip family"), required=False, choices=[("", _("Any chip")), *Backend.choices])
    tag = _filter(_("Tag"))
    sort = forms.ChoiceField(label=_("Sort"), required=False, choices=HubSort.choices)

    def hub_query(self) -> HubQuery:
        data = self.cleaned_data
        return HubQuery(**{name: data.get(name) or "" for name in HubQuery.__dataclass_fields__})

    def sort_order(self) -> str:
        return self.cleaned_data.get("sort") or HubSort.MOUNTS
