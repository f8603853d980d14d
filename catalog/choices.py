"""Choices of the catalog."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class Backend(models.TextChoices):
    """A chip family, as users pass it to the CLI with ``--backend``."""

    NPU = "npu", _("Ascend NPU (CANN)")
    MLU = "mlu", _("Cambricon MLU (Neuware)")
    DCU = "dcu", _("Hygon DCU (DTK)")
    CUDA = "cuda", _("NVIDIA GPU (CUDA)")


# Families built in China: the only ones the Xinchuang zone may hold.
DOMESTIC_BACKENDS = frozenset({Backend.NPU, Backend.MLU, Backend.DCU})

# The card counts a spec offers on one node.
SPEC_CARD_COUNTS = (1, 2, 4, 8)
