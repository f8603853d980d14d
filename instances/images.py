"""The base images an instance can boot, per backend family, until the marketplace issue lands.

Issue 6 replaces this small catalogue with the marketplace's image variants (one variant per backend of a
multi-arch image); instances keep the image as a reference (a slug), so only this module changes then.
"""

from dataclasses import dataclass

from django.utils.translation import gettext as _

from console.errors import ServiceError

from .choices import Backend


@dataclass(frozen=True)
class BaseImage:
    slug: str
    name: str
    family: str  # a Backend value, or "" for a CPU-only image that runs in no-card mode only
    os: str


BASE_IMAGES = (
    BaseImage("pytorch-2.2-cann8", "PyTorch 2.2 + CANN 8 (torch_npu)", Backend.NPU, "Ubuntu 22.04"),
    BaseImage("mindspore-2.3-cann8", "MindSpore 2.3 + MindFormers + CANN 8", Backend.NPU, "openEuler 22.03"),
    BaseImage("pytorch-2.2-neuware", "PyTorch 2.2 + Neuware (torch_mlu)", Backend.MLU, "Ubuntu 22.04"),
    BaseImage("magicmind-1.10", "MagicMind 1.10 + Neuware", Backend.MLU, "Kylin V10"),
    BaseImage("pytorch-2.2-dtk24", "PyTorch 2.2 + DTK 24.04 (HIP)", Backend.DCU, "UOS 20"),
    BaseImage("pytorch-2.2-cuda12", "PyTorch 2.2 + CUDA 12", Backend.CUDA, "Ubuntu 22.04"),
    BaseImage("vllm-0.6-cuda12", "vLLM 0.6 + CUDA 12", Backend.CUDA, "Ubuntu 22.04"),
    BaseImage("ubuntu-22.04", "Ubuntu 22.04 (CPU only)", "", "Ubuntu 22.04"),
)
_BY_SLUG = {image.slug: image for image in BASE_IMAGES}


def compatible_images(family: str | None) -> list[BaseImage]:
    """Images that boot on ``family`` (None: the no-card mode, where every image boots on the CPU)."""
    if family is None:
        return list(BASE_IMAGES)
    return [image for image in BASE_IMAGES if image.family == family]


def get_image(slug: str, family: str | None) -> BaseImage:
    """The image ``slug`` if it boots on ``family``; bad input (400) otherwise."""
    image = _BY_SLUG.get(slug or "")
    if image is None:
        raise ServiceError(_("Unknown image “%(slug)s”.") % {"slug": slug}, code="unknown_image")
    if family is not None and image.family != family:
        names = ", ".join(i.slug for i in compatible_images(family))
        raise ServiceError(
            _("The image “%(image)s” does not run on %(family)s cards; choose one of: %(names)s.")
            % {"image": image.name, "family": Backend(family).label, "names": names},
            code="incompatible_image",
        )
    return image


def image_name(slug: str) -> str:
    image = _BY_SLUG.get(slug)
    return image.name if image else slug
