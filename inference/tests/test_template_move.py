"""Inference templates moved out of the marketplace app with their table: a database with templates and an
endpoint deployed from one migrates back to the schema before the move and forward again with every row, the
endpoint's link to its template and the content type."""

import pytest
from django.contrib.contenttypes.models import ContentType

from inference.models import Endpoint, InferenceTemplate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("inference", "0002_endpoint_key_made_by"), ("marketplace", "0010_tiny_demo_framework")]


def test_templates_and_the_endpoints_deployed_from_them_survive_the_move_both_ways(migrator, owner, deploy):
    endpoint = deploy(owner, name="kept-template")
    templates = dict(InferenceTemplate.objects.values_list("slug", "model__repo"))
    assert len(templates) > 10

    old = migrator.to(BEFORE)
    before = old.get_model("marketplace", "InferenceTemplate").objects
    assert dict(before.values_list("slug", "model__repo")) == templates
    old_endpoint = old.get_model("inference", "Endpoint").objects.get(public_id=endpoint.public_id)
    assert old_endpoint.template.slug == endpoint.template.slug
    assert (
        old.get_model("contenttypes", "ContentType")
        .objects.filter(app_label="marketplace", model="inferencetemplate")
        .exists()
    )

    migrator.to_latest()

    assert dict(InferenceTemplate.objects.values_list("slug", "model__repo")) == templates
    assert Endpoint.objects.get(public_id=endpoint.public_id).template.slug == endpoint.template.slug
    assert ContentType.objects.filter(app_label="inference", model="inferencetemplate").exists()
    assert not ContentType.objects.filter(app_label="marketplace", model="inferencetemplate").exists()
