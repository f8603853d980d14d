"""Inference endpoints moved out of the instances app with their tables: a database with endpoints, keys and
request logs migrates back to the schema before the move and forward again with every row and content type."""

import pytest
from django.contrib.contenttypes.models import ContentType

from inference import services as endpoints
from inference.models import Endpoint, EndpointKey, EndpointRequest

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("inference", None), ("instances", "0007_catalog_app")]


def test_endpoints_keys_and_their_log_survive_the_move_both_ways(migrator, owner, deploy):
    endpoint = deploy(owner, name="kept-qwen")
    key = endpoints.create_key(endpoint)
    endpoints.log_request(
        endpoint,
        key.key,
        path="chat/completions",
        status_code=200,
        latency_ms=12,
        usage={"prompt_tokens": 3, "completion_tokens": 5},
    )

    old = migrator.to(BEFORE)
    before = old.get_model("instances", "Endpoint").objects.get(public_id=endpoint.public_id)
    assert before.served_model == endpoint.served_model and before.instance_id == endpoint.instance_id
    content_types = old.get_model("contenttypes", "ContentType").objects
    assert content_types.filter(app_label="instances", model="endpoint").exists()

    migrator.to_latest()

    moved = Endpoint.objects.get(public_id=endpoint.public_id)
    assert moved.instance.name == "kept-qwen"
    assert EndpointKey.objects.get(endpoint=moved).prefix == key.key.prefix
    row = EndpointRequest.objects.get(endpoint=moved)
    assert (row.status_code, row.prompt_tokens, row.completion_tokens) == (200, 3, 5)

    assert ContentType.objects.filter(app_label="inference", model="endpoint").exists()
    assert not ContentType.objects.filter(app_label="instances", model="endpoint").exists()
