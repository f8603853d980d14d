"""An imported image as the import task leaves it (ready, with its checks and config), made without a registry: for
tests of what the console does with an imported image rather than of the import itself."""

import pytest

from marketplace.choices import CPU_ONLY, ImageCategory, ImageReview, ImageStatus, ImportStep
from marketplace.models import Image, ImageImport, ImageVariant


@pytest.fixture
def imported_image(db):
    """``imported_image(owner, family="cuda", jupyterlab=False, ports=())``: a ready imported image of ``owner``'s
    whose libraries suggest ``family`` ("" for none)."""

    def make(owner, family="cuda", *, name="trainer", jupyterlab=False, ports=()) -> Image:
        slug = f"{name}-{owner.pk}"
        image = Image.objects.create(
            slug=slug,
            name=name,
            publisher=str(owner),
            owner=owner,
            category=ImageCategory.COMMUNITY,
            review_state=ImageReview.DRAFT,
            status=ImageStatus.READY,
            size_bytes=1000,
        )
        checks = {
            "shell": True,
            "python": "/usr/bin/python3",
            "jupyterlab": "/usr/local/bin/jupyter-lab" if jupyterlab else "",
            "families": [family] if family else [],
            "family": family,
        }
        config = {"cmd": ["python3", "train.py"], "working_dir": "/app", "exposed_ports": list(ports)}
        ImageImport.objects.create(
            image=image,
            reference=f"registry.example.com/team/{name}:1",
            step=ImportStep.DONE,
            checks=checks,
            config=config,
        )
        ImageVariant.objects.create(image=image, family=family or CPU_ONLY, slug=f"{slug}-{family or 'cpu'}", os="")
        return image

    return make
