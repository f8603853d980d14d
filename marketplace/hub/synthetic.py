"""Synthetic hub items for scale tests: mixed Chinese and English, realistic tasks, licences and popularity.

Every synthetic item is labelled as such (tag ``synthetic``, summary "Synthetic entry…") so nobody mistakes one for
a real model. Items are written in bulk, with their search columns computed by the same code as the services.
"""

import random
from decimal import Decimal

from django.db import transaction

from .. import seed as catalog
from ..choices import HubKind, HubVisibility
from ..models import HubItem
from . import search, services

ORGS = [
    "THUDM",
    "Qwen",
    "baichuan-inc",
    "internlm",
    "BAAI",
    "hfl",
    "PaddlePaddle",
    "MindSpore",
    "deepseek-ai",
    "01-ai",
    "shanghai-med-lab",
    "fin-ai-cn",
    "gov-cloud-lab",
    "edu-nlp",
    "law-llm",
    "open-speech",
    "vision-cn",
]
BASES = [
    "chatglm3",
    "qwen2.5",
    "baichuan2",
    "internlm2",
    "llama3",
    "yi",
    "bert",
    "ernie",
    "bloom",
    "mistral",
    "whisper",
    "resnet",
    "vit",
    "sdxl",
    "bge",
    "gpt2",
    "t5",
    "glm4",
]
DOMAINS = [
    ("medical", "医疗", "yiliao"),
    ("finance", "金融", "jinrong"),
    ("legal", "法律", "falv"),
    ("education", "教育", "jiaoyu"),
    ("customer service", "客服", "kefu"),
    ("government", "政务", "zhengwu"),
    ("code", "代码", "code"),
    ("dialogue", "对话", "duihua"),
    ("Chinese", "中文", "zh"),
    ("poetry", "古诗词", "shici"),
    ("e-commerce", "电商", "dianshang"),
    ("news", "新闻", "xinwen"),
]
TASKS = [
    "text-generation",
    "conversational",
    "feature-extraction",
    "fill-mask",
    "question-answering",
    "translation",
    "summarization",
    "text-classification",
    "image-classification",
    "object-detection",
    "automatic-speech-recognition",
    "text-to-image",
]
LICENCES = ["Apache-2.0", "MIT", "CC BY 4.0", "CC BY-NC 4.0", "GPL-3.0", "Llama 2 community license", "other"]
LANGUAGES = [["zh"], ["en"], ["zh", "en"], ["multilingual"]]
FRAMEWORKS = [["pytorch"], ["pytorch", "mindspore"], ["mindspore"], ["paddle"], ["pytorch", "paddle"]]
SIZES = ["0.5b", "1.8b", "6b", "7b", "13b", "14b", "34b", "72b"]


def _item(rng: random.Random, number: int) -> HubItem:
    kind = HubKind.DATASET if rng.random() < 0.25 else HubKind.MODEL
    base, (domain_en, domain_zh, domain_slug) = rng.choice(BASES), rng.choice(DOMAINS)
    task = rng.choice(TASKS)
    size = rng.choice(SIZES)
    names = catalog.task_names(task)
    frameworks = rng.choice(FRAMEWORKS)
    if kind == HubKind.MODEL:
        name = f"{base}-{domain_slug}-{size}-{number}"
        summary = f"Synthetic entry: {base} {size} fine-tuned for {domain_en} {names.get('en', task).lower()}."
        summary_zh = f"合成条目：基于 {base} 微调的{domain_zh}{names.get('zh', task).split()[0]}模型。"
        params = Decimal(size.rstrip("b"))
    else:
        name = f"{domain_slug}-{task}-data-{number}"
        summary = f"Synthetic entry: {domain_en} data set for {names.get('en', task).lower()}."
        summary_zh = f"合成条目：{domain_zh}领域的{names.get('zh', task).split()[0]}数据集。"
        params = None
    item = HubItem(
        repo=f"{rng.choice(ORGS)}/{name}",
        kind=kind,
        summary=summary,
        summary_zh=summary_zh,
        task=task,
        licence=rng.choice(LICENCES),
        languages=rng.choice(LANGUAGES),
        parameters_b=params,
        size_bytes=rng.randint(10**8, 2 * 10**11),
        frameworks=frameworks if kind == HubKind.MODEL else [],
        chips=catalog.chips_for(kind, frameworks),
        tags=["synthetic", domain_zh, domain_en.split()[0].lower()],
        visibility=HubVisibility.PUBLIC,
        # Popularity is heavy-tailed, as on real hubs: a few items carry most mounts and likes.
        mount_count=int(rng.paretovariate(1.2)) - 1,
        likes_count=int(rng.paretovariate(1.5)) - 1,
    )
    services.index_document(item)
    return item


def generate(count: int, *, seed: int = 7, batch_size: int = 5000) -> int:
    """Create ``count`` synthetic public items in batches; returns how many were created."""
    rng = random.Random(seed)
    start = HubItem.objects.count()
    created = 0
    while created < count:
        batch = [_item(rng, start + created + i) for i in range(min(batch_size, count - created))]
        with transaction.atomic():
            rows = HubItem.objects.bulk_create(batch)
            search.sync(row.pk for row in rows)
        created += len(batch)
    return created
