"""A model's choice labels read from a dict built once per field are the labels Django gives, in each language."""

import pytest
from django.db import models
from django.utils import translation

from instances.choices import Status
from instances.models import Instance
from marketplace.models import Image


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_each_status_reads_as_djangos_own_label_in_each_language(language):
    field = Instance._meta.get_field("status")
    with translation.override(language):
        for value in [*Status.values, "no-such-status"]:
            instance = Instance(status=value)
            assert instance.get_status_display() == models.Model._get_FIELD_display(instance, field)
    with translation.override("zh-hans"):
        assert Instance(status=Status.RUNNING).get_status_display() != "Running"


def test_every_choice_field_of_a_model_reads_the_same_way():
    image = Image()
    for field in Image._meta.fields:
        if field.choices:
            assert getattr(image, f"get_{field.name}_display")() == models.Model._get_FIELD_display(image, field)
