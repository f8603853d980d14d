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


class HubRepoForm(forms.Form):
    """A new repository: namespace/name, model or dataset, public or private."""

    namespace = forms.CharField(
        label=_("Namespace"), max_length=100, help_text=_("Yours: claimed the first time you publish under it.")
    )
    name = forms.CharField(label=_("Name"), max_length=100)
    kind = forms.ChoiceField(label=_("Kind"), choices=HubKind.choices, initial=HubKind.MODEL)
    private = forms.BooleanField(label=_("Private (only you can see and download it)"), required=False)


class HubUploadForm(forms.Form):
    message = forms.CharField(label=_("Commit message"), max_length=500, initial="Upload files")
    folder = forms.CharField(
        label=_("Into folder"), max_length=200, required=False, help_text=_("Empty: the repository's top level.")
    )
