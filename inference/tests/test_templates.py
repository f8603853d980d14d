"""Inference templates: the seed covers the hub's chat models on each compatible chip family, idempotently."""

import pytest

from inference import template_catalog as services
from inference.models import InferenceTemplate

pytestmark = pytest.mark.django_db


def test_the_seed_loads_templates_for_chat_models_on_each_family_and_is_idempotent(inference_catalog):
    first = InferenceTemplate.objects.count()
    assert services.load() == {"created": 0, "existing": first, "skipped": 0}
    families = {
        (t.model.repo, t.framework, t.variant.family)
        for t in InferenceTemplate.objects.select_related("model", "variant")
    }
    assert ("THUDM/chatglm3-6b", "mindformers", "npu") in families
    assert ("THUDM/chatglm3-6b", "vllm", "cuda") in families
    assert ("Qwen/Qwen2.5-7B-Instruct", "mindformers", "npu") in families
    assert ("Qwen/Qwen2.5-0.5B-Instruct", "magicmind", "mlu") in families
    assert {t.model.task for t in InferenceTemplate.objects.select_related("model")} == {"text-generation"}


def test_a_template_runs_only_on_chips_of_its_family_that_the_model_fits(inference_catalog):
    a800_only = services.get_template("chatglm3-6b-vllm-a800")
    assert [c.slug for c in services.chips_of(a800_only)] == ["a800-80g"]
    npu = services.get_template("chatglm3-6b-mindformers")
    assert {c.backend for c in services.chips_of(npu)} == {"npu"}


def test_the_template_list_query_count_does_not_grow_with_templates(
    client, inference_catalog, django_assert_max_num_queries
):
    client.cookies["django_language"] = "en"
    InferenceTemplate.objects.exclude(slug__startswith="qwen2.5-0.5b").update(active=False)
    with django_assert_max_num_queries(30) as few:
        client.get("/marketplace/inference/")
    InferenceTemplate.objects.update(active=True)
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert client.get("/marketplace/inference/").content.decode().count("Deploy as API") > 10
