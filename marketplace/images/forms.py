"""Forms of the image marketplace: the search (a GET form, so the URL reflects the filters), saving an instance as
an image, rating and reviewing. They check shapes; the services decide."""

from django import forms
from django.utils.translation import gettext_lazy as _

from instances.choices import Backend

from ..choices import ImageCategory, ImageSort, OperatingSystem
from .search import ImageQuery
from .services import MAX_COMMENT, MAX_DESCRIPTION, MAX_NAME, MAX_REASON

MAX_QUERY_LENGTH = 200
MAX_FILTER_LENGTH = 100

FAMILY_CHOICES = [("", _("Any chip family")), *Backend.choices, ("cpu", _("CPU only"))]
# What an imported image is for: a chip family, or none (a CPU image).
IMAGE_FAMILY_CHOICES = [*Backend.choices, ("", _("None (CPU only)"))]


class ImageFamilyForm(forms.Form):
    """The owner's word on which chip family an imported image is for."""

    family = forms.ChoiceField(label=_("Chip family"), required=False, choices=IMAGE_FAMILY_CHOICES)


class ImageSearchForm(forms.Form):
    q = forms.CharField(label=_("Search"), required=False, max_length=MAX_QUERY_LENGTH, strip=True)
    category = forms.ChoiceField(
        label=_("Category"), required=False, choices=[("", _("All categories")), *ImageCategory.choices]
    )
    family = forms.ChoiceField(label=_("Chip family"), required=False, choices=FAMILY_CHOICES)
    chip = forms.SlugField(label=_("Chip"), required=False, max_length=50)
    framework = forms.CharField(label=_("Framework"), required=False, max_length=MAX_FILTER_LENGTH, strip=True)
    os = forms.ChoiceField(
        label=_("Operating system"), required=False, choices=[("", _("Any OS")), *OperatingSystem.choices]
    )
    tag = forms.CharField(label=_("Tag"), required=False, max_length=MAX_FILTER_LENGTH, strip=True)
    sort = forms.ChoiceField(label=_("Sort"), required=False, choices=ImageSort.choices)

    def image_query(self, family_of_chip) -> ImageQuery:
        """The parsed query; a chip narrows to its family (``family_of_chip`` raises for an unknown chip)."""
        data = self.cleaned_data
        family = data.get("family") or ""
        if data.get("chip"):
            family = family_of_chip(data["chip"])
        values = {name: data.get(name) or "" for name in ("q", "category", "framework", "os", "tag")}
        return ImageQuery(family=family, **values)

    def sort_order(self) -> str:
        return self.cleaned_data.get("sort") or ImageSort.POPULAR


class SaveImageForm(forms.Form):
    name = forms.CharField(
        label=_("Image name"), max_length=MAX_NAME, widget=forms.TextInput(attrs={"class": "form-control"})
    )
    description = forms.CharField(
        label=_("Description (Markdown)"),
        required=False,
        max_length=MAX_DESCRIPTION,
        widget=forms.Textarea(attrs={"class": "form-control", "rows": 6}),
    )


class RatingForm(forms.Form):
    stars = forms.TypedChoiceField(
        label=_("Stars"),
        coerce=int,
        choices=[(n, n) for n in range(5, 0, -1)],
        widget=forms.Select(attrs={"class": "form-select"}),
    )
    comment = forms.CharField(
        label=_("Comment"),
        required=False,
        max_length=MAX_COMMENT,
        widget=forms.Textarea(attrs={"class": "form-control", "rows": 3}),
    )


class ReviewForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", _("List it")), ("reject", _("Reject it"))])
    reason = forms.CharField(label=_("Reason (shown to the author)"), required=False, max_length=MAX_REASON)


class ImportImageForm(forms.Form):
    reference = forms.CharField(
        label=_("Image reference"),
        required=False,
        max_length=500,
        help_text=_("registry/namespace/name:tag or …@sha256:<digest>; without a registry, Docker Hub."),
        widget=forms.TextInput(attrs={"class": "form-control", "placeholder": "registry.example.com/team/train:1.0"}),
    )
    archive = forms.CharField(
        label=_("Or an archive in your cloud storage"),
        required=False,
        max_length=2048,
        help_text=_("The path of a “docker save” tar or an OCI layout tar you uploaded, e.g. /images/train.tar."),
        widget=forms.TextInput(attrs={"class": "form-control", "placeholder": "/images/train.tar"}),
    )
    username = forms.CharField(
        label=_("Registry user (private registries)"),
        required=False,
        max_length=1000,
        widget=forms.TextInput(attrs={"class": "form-control"}),
    )
    password = forms.CharField(
        label=_("Password or token"),
        required=False,
        max_length=1000,
        help_text=_("Stored encrypted and never shown again."),
        widget=forms.PasswordInput(attrs={"class": "form-control"}),
    )
    name = forms.CharField(
        label=_("Image name"),
        required=False,
        max_length=MAX_NAME,
        widget=forms.TextInput(attrs={"class": "form-control"}),
    )
