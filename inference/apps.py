from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class InferenceConfig(AppConfig):
    name = "inference"
    verbose_name = _("Inference endpoints")
