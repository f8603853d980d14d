"""Template filters for hub pages: names in the active language and sizes in decimal units."""

from decimal import Decimal

from django import template
from django.utils.translation import get_language
from django.utils.translation import gettext_lazy as _

from instances.choices import Backend

from ..hub import services

register = template.Library()

_UNITS = ("B", "KB", "MB", "GB", "TB", "PB")

# A chip family's badge on list and detail pages: a short name a person reads, never the slug (npu, cuda…).
_FAMILY_BADGES = {
    "npu": _("Ascend"),
    "mlu": _("Cambricon"),
    "dcu": _("Hygon"),
    "cuda": _("NVIDIA"),
    "": _("CPU only"),
    "cpu": _("CPU only"),
}


@register.filter
def family_badge(family) -> str:
    """The short name of a chip family (``npu`` → 昇腾 in Chinese, Ascend in English)."""
    return str(_FAMILY_BADGES.get(family or "", family))


@register.filter
def summary(item) -> str:
    """The item's summary in the active language (falling back to the other one)."""
    return item.summary_for(get_language() or "") or item.summary_zh


@register.filter
def task_label(task: str) -> str:
    return services.task_label(task, get_language() or "") if task else ""


@register.filter
def language_names(codes) -> str:
    """A card's language codes as names in the active language: ["zh", "en"] → "Chinese, English"."""
    return ", ".join(services.language_label(code) for code in codes or [])


@register.filter
def chip_family(value: str) -> str:
    try:
        return str(Backend(value).label)
    except ValueError:
        return value


@register.filter
def decimal_size(size_bytes) -> str:
    """Bytes in decimal units as storage vendors and model hubs count them: 12,500,000,000 → 12.5 GB."""
    if size_bytes in (None, ""):
        return ""
    amount, unit = Decimal(int(size_bytes)), 0
    while amount >= 1000 and unit < len(_UNITS) - 1:
        amount, unit = amount / 1000, unit + 1
    places = Decimal(1) if unit == 0 or amount >= 100 else Decimal("0.1")
    return f"{amount.quantize(places).normalize():f} {_UNITS[unit]}"


# Framework tags as their projects spell them (the hub's cards use lower-case slugs).
_FRAMEWORKS = {
    "pytorch": "PyTorch",
    "mindspore": "MindSpore",
    "paddle": "PaddlePaddle",
    "paddlenlp": "PaddleNLP",
    "transformers": "Transformers",
    "diffusers": "Diffusers",
    "sentence-transformers": "Sentence Transformers",
}


@register.filter
def framework_name(value) -> str:
    """``pytorch`` → PyTorch; a name the map does not know as it is written."""
    return _FRAMEWORKS.get(value, value)


@register.filter
def framework_names(values) -> str:
    return (
        "、".join(framework_name(v) for v in values or [])
        if _chinese()
        else ", ".join(framework_name(v) for v in values or [])
    )


def _chinese() -> bool:
    return (get_language() or "").startswith("zh")


_LICENCE_KINDS = (
    (" community license", _("%(name)s community licence")),
    (" model license", _("%(name)s model licence")),
    (" license", _("%(name)s licence")),
)
_LICENCES = {
    "unknown": _("not stated"),
    "ImageNet terms of access": _("ImageNet terms of access"),
    "Apache-2.0 (code), custom (weights)": _("Apache-2.0 for the code, its own terms for the weights"),
}


@register.filter
def licence_name(value) -> str:
    """A card's licence in the page's language: "Llama 2 community license" → Llama 2 社区许可证; standard
    identifiers (Apache-2.0, MIT, CC BY 4.0) as they are."""
    if value in _LICENCES:
        return str(_LICENCES[value])
    for suffix, template_text in _LICENCE_KINDS:
        if value and value.endswith(suffix):
            return str(template_text) % {"name": value[: -len(suffix)]}
    return value or ""
