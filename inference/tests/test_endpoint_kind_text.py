"""The deploy page names the endpoint's kind in the reader's language, never the slug "endpoint"."""

import pytest

pytestmark = pytest.mark.django_db


def test_the_deploy_page_says_inference_endpoint_in_chinese_not_the_kind_slug(owner_client, inference_catalog):
    html = owner_client.get("/endpoints/deploy/qwen2.5-0.5b-instruct-vllm/").content.decode()

    assert "类型为“推理服务”的实例" in html and "类型为 endpoint" not in html


def test_the_deploy_page_names_the_kind_in_english(owner_client, inference_catalog):
    owner_client.cookies["django_language"] = "en"

    html = owner_client.get("/endpoints/deploy/qwen2.5-0.5b-instruct-vllm/").content.decode()

    assert "an instance of the kind “Inference endpoint”" in html
