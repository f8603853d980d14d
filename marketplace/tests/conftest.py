"""Hub fixtures: items written through the service, as every real writer does."""

import pytest
from django.conf import settings
from django.core.files.storage import storages

from marketplace.hub import services
from marketplace.tests.registry_fixtures import image_imports, registry, tiny_image, tiny_mlu_image  # noqa: F401


@pytest.fixture
def make_item(db):
    """``make_item("org/name", **fields)``: a public platform item unless ``owner``/``visibility`` say otherwise."""

    def make(repo, **fields):
        return services.save_item(repo=repo, **fields)

    return make


@pytest.fixture
def chat_models(make_item):
    """A few realistic items: Chinese chat models, an English model, a medical model and a data set."""
    return {
        "chatglm": make_item(
            "THUDM/chatglm3-6b",
            summary="Bilingual chat model.",
            summary_zh="ChatGLM3 中文对话模型",
            task="text-generation",
            licence="ChatGLM3 model license",
            languages=["zh", "en"],
            frameworks=["pytorch", "mindspore"],
            chips=["npu", "mlu", "dcu", "cuda"],
            tags=["chat", "对话"],
        ),
        "qwen": make_item(
            "Qwen/Qwen2.5-7B-Instruct",
            summary="Instruction-tuned 7B model.",
            summary_zh="通义千问指令模型",
            task="text-generation",
            licence="Apache-2.0",
            languages=["zh", "en"],
            frameworks=["pytorch"],
            chips=["npu", "cuda"],
        ),
        "llama": make_item(
            "meta-llama/Meta-Llama-3-8B-Instruct",
            summary="English instruction model.",
            task="text-generation",
            licence="Llama 3 community license",
            languages=["en"],
            frameworks=["pytorch"],
            chips=["cuda"],
        ),
        "medical": make_item(
            "shanghai-med-lab/yiliao-qa-7b",
            summary="Medical question answering.",
            summary_zh="医疗问答模型",
            task="question-answering",
            licence="MIT",
            languages=["zh"],
            frameworks=["mindspore"],
            chips=["npu"],
            tags=["医疗"],
        ),
        "lccc": make_item(
            "thu-coai/lccc",
            kind="dataset",
            summary="Chinese conversation corpus.",
            summary_zh="大规模中文开放域对话语料",
            task="conversational",
            licence="MIT",
            languages=["zh"],
            chips=["npu", "mlu", "dcu", "cuda"],
        ),
    }


@pytest.fixture
def english(client):
    """Pages in English (the console defaults to Chinese; the language switch sets this cookie)."""
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    return client


@pytest.fixture
def hub_storage(settings, tmp_path):
    """The hub's files in this test's own folder (the sweep looks at every file of the storage)."""

    storages._storages.pop("hub", None)
    settings.STORAGES = settings.STORAGES | {
        "hub": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "hub")},
        }
    }
    yield
    storages._storages.pop("hub", None)
