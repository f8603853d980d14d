from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _

from teams.signals import operate_lost


class InferenceConfig(AppConfig):
    name = "inference"
    verbose_name = _("Inference endpoints")

    def ready(self):
        from .services import revoke_keys_of

        operate_lost.connect(revoke_keys_of, dispatch_uid="inference.revoke_keys_of")
