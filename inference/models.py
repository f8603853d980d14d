"""Inference (SPEC §9): the templates a model is served from, and endpoints — an instance of kind "endpoint" serving
a template — with their API keys and the log of requests proxied to them. The operations live in
``inference.template_catalog`` and ``inference.services``."""

import uuid

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from marketplace.models import SLUG_VALIDATOR
from teams.access import owned


class InferenceTemplate(models.Model):
    """A hub model served by a framework (vLLM, MindFormers, TensorRT-LLM, MagicMind) from one image variant, on
    the chips of that variant's family, with a default size and serving arguments (SPEC §9); or, from a CPU-only
    variant, in the no-card mode (the tiny demo model). Deploying it makes an endpoint (``inference.services``)."""

    class Framework(models.TextChoices):
        VLLM = "vllm", "vLLM"
        MINDFORMERS = "mindformers", "MindFormers"
        TENSORRT_LLM = "tensorrt-llm", "TensorRT-LLM"
        MAGICMIND = "magicmind", "MagicMind"
        TINY_LM = "tiny-lm", _("tiny demo server (CPU)")

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    slug = models.CharField(_("slug"), max_length=64, unique=True, validators=[SLUG_VALIDATOR])
    model = models.ForeignKey(
        "marketplace.HubItem", on_delete=models.PROTECT, related_name="inference_templates", verbose_name=_("model")
    )
    framework = models.CharField(_("serving framework"), max_length=16, choices=Framework.choices)
    variant = models.ForeignKey(
        "marketplace.ImageVariant",
        on_delete=models.PROTECT,
        related_name="inference_templates",
        verbose_name=_("image variant"),
    )
    chips = models.JSONField(
        _("chips"), default=list, blank=True, help_text=_("Chip slugs it fits on; empty: every chip of the family.")
    )
    cards = models.PositiveSmallIntegerField(_("default cards"), default=1)
    arguments = models.CharField(_("serving arguments"), max_length=500, blank=True)
    active = models.BooleanField(_("active"), default=True)
    sort_order = models.PositiveSmallIntegerField(default=100)

    class Meta:
        verbose_name = _("inference template")
        verbose_name_plural = _("inference templates")
        ordering = ["sort_order", "slug"]
        db_table = "marketplace_inferencetemplate"  # made by the marketplace app, where templates began

    def __str__(self):
        return self.slug

    def get_absolute_url(self):
        return reverse("inference:template", args=[self.slug])

    @property
    def family(self) -> str:
        return self.variant.family

    @property
    def needs_a_card(self) -> bool:
        """Whether its model needs an accelerator card: every template but those of a CPU-only image variant."""
        return not self.variant.is_cpu_only

    @property
    def served_name(self) -> str:
        """The model name clients pass as ``model`` (the repo's name, as vLLM serves it)."""
        return self.model.repo.split("/")[-1]


class EndpointQuerySet(models.QuerySet):
    def for_user(self, user, action: str = "view"):
        """The endpoints ``user`` may ``action``: those of their own instances and of their teams' as their role
        allows (the same rule as instances, ``teams.access``)."""
        if user is None or not user.is_authenticated:
            return self.none()
        return self.filter(owned(user, action, "instance__owner"))

    def with_related(self):
        return self.select_related(
            "instance__zone",
            "instance__chip",
            "instance__spec",
            "instance__plan",
            "instance__node",
            "template__model",
            "template__variant",
        )


class Endpoint(models.Model):
    """The OpenAI-compatible face of one instance: which template it serves and when it scales to zero."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    instance = models.OneToOneField("instances.Instance", on_delete=models.PROTECT, related_name="endpoint")
    template = models.ForeignKey(
        InferenceTemplate, on_delete=models.PROTECT, related_name="endpoints", verbose_name=_("template")
    )
    served_model = models.CharField(_("model name"), max_length=100, help_text=_("What clients pass as “model”."))
    idle_stop_minutes = models.PositiveIntegerField(
        _("scale to zero after idle minutes"), null=True, blank=True, help_text=_("Empty: keep running.")
    )
    last_request_at = models.DateTimeField(_("last request"), null=True, blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    objects = EndpointQuerySet.as_manager()

    class Meta:
        db_table = "instances_endpoint"  # the table it had in the instances app
        verbose_name = _("inference endpoint")
        verbose_name_plural = _("inference endpoints")
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.served_model} ({self.public_id})"

    def get_absolute_url(self):
        return reverse("endpoints:detail", args=[self.public_id])


class EndpointKey(models.Model):
    """An API key of one endpoint (``sk-…``). Only a SHA-256 hash is stored; the visible prefix finds the row, and
    the key identifies its endpoint: it never reaches another one."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="keys")
    name = models.CharField(_("name"), max_length=64)
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    key_hash = models.CharField(max_length=64, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("created by"),
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True)
    revoked_at = models.DateTimeField(_("revoked"), null=True, blank=True)

    class Meta:
        db_table = "instances_endpointkey"  # the table it had in the instances app
        verbose_name = _("endpoint key")
        verbose_name_plural = _("endpoint keys")
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class EndpointRequest(models.Model):
    """One request proxied to an endpoint: when, which path, the answer's status, latency and token counts."""

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="requests")
    key = models.ForeignKey(EndpointKey, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    at = models.DateTimeField(_("at"))
    path = models.CharField(_("path"), max_length=64)
    status_code = models.PositiveSmallIntegerField(_("status"))
    latency_ms = models.PositiveIntegerField(_("latency (ms)"))
    prompt_tokens = models.PositiveIntegerField(_("prompt tokens"), default=0)
    completion_tokens = models.PositiveIntegerField(_("completion tokens"), default=0)
    stream = models.BooleanField(_("streamed"), default=False)

    class Meta:
        db_table = "instances_endpointrequest"  # the table it had in the instances app
        verbose_name = _("endpoint request")
        verbose_name_plural = _("endpoint requests")
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["endpoint", "-at"], name="endpointrequest_recent")]

    def __str__(self):
        return f"{self.endpoint_id} {self.path} {self.status_code} at {self.at:%H:%M:%S}"

    @property
    def ok(self) -> bool:
        return 200 <= self.status_code < 300
