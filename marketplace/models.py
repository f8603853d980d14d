"""The model & dataset hub: items (models and data sets), their files and users' likes.

The image marketplace (issue 6) will live beside these models; every hub name starts with ``Hub``.
Items are written only through ``marketplace.hub.services`` so that the search columns, the rendered card and
the counters stay in step with what the item says.
"""

import uuid

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from .choices import MOUNT_ROOTS, HubKind, HubVisibility
from .querysets import HubFileQuerySet, HubItemQuerySet, HubLikeQuerySet


class HubItem(models.Model):
    """A model or data set that instances can mount read-only (SPEC §8).

    ``owner`` is empty for the platform's public catalogue. List fields (languages, frameworks, chips, tags) are
    small JSON lists for display; filtering uses the indexed ``facet_text`` instead (see ``hub/search.py``).
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    repo = models.CharField(_("repository"), max_length=201, unique=True, help_text=_("org/name"))
    kind = models.CharField(_("kind"), max_length=8, choices=HubKind.choices, default=HubKind.MODEL)
    summary = models.CharField(_("summary"), max_length=300, blank=True)
    summary_zh = models.CharField(_("summary (Chinese)"), max_length=300, blank=True)
    task = models.CharField(_("task"), max_length=64, blank=True)
    licence = models.CharField(_("licence"), max_length=100, blank=True)
    library_name = models.CharField(_("library"), max_length=64, blank=True)
    languages = models.JSONField(_("languages"), default=list, blank=True)
    parameters_b = models.DecimalField(
        _("parameters (billions)"), max_digits=9, decimal_places=3, null=True, blank=True
    )
    size_bytes = models.BigIntegerField(_("size (bytes)"), default=0)
    rows = models.BigIntegerField(_("rows"), null=True, blank=True, help_text=_("Data sets only."))
    frameworks = models.JSONField(_("frameworks"), default=list, blank=True)
    chips = models.JSONField(
        _("compatible chip families"), default=list, blank=True, help_text=_("Backend families: npu, mlu, dcu, cuda.")
    )
    tags = models.JSONField(_("tags"), default=list, blank=True)
    card = models.TextField(_("model card (Markdown)"), blank=True)
    card_html = models.TextField(_("rendered card"), blank=True, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="hub_items",
        verbose_name=_("owner"),
        help_text=_("Empty for the platform catalogue."),
    )
    visibility = models.CharField(
        _("visibility"), max_length=8, choices=HubVisibility.choices, default=HubVisibility.PUBLIC
    )
    mount_count = models.PositiveIntegerField(_("mounts"), default=0)
    likes_count = models.PositiveIntegerField(_("likes"), default=0)
    search_text = models.TextField(editable=False, blank=True)
    facet_text = models.TextField(editable=False, blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    objects = HubItemQuerySet.as_manager()

    class Meta:
        verbose_name = _("hub item")
        verbose_name_plural = _("hub items")
        ordering = ["-mount_count", "-id"]
        indexes = [
            models.Index(fields=["-mount_count", "-id"], name="hub_item_mounts"),
            models.Index(fields=["-likes_count", "-id"], name="hub_item_likes"),
            models.Index(fields=["-created_at", "-id"], name="hub_item_newest"),
            models.Index(fields=["owner", "visibility"], name="hub_item_owner"),
        ]

    def __str__(self):
        return self.repo

    @property
    def org(self) -> str:
        return self.repo.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.repo.split("/", 1)[-1]

    @property
    def is_public(self) -> bool:
        return self.visibility == HubVisibility.PUBLIC

    @property
    def mount_path(self) -> str:
        """Where the item appears, read-only, inside an instance that mounts it."""
        return f"{MOUNT_ROOTS[self.kind]}/{self.repo}"

    def summary_for(self, language: str) -> str:
        return self.summary_zh if language.startswith("zh") and self.summary_zh else self.summary


class HubFile(models.Model):
    """One file of a hub item, with its size. Mounts expose these read-only; nothing is copied."""

    item = models.ForeignKey(HubItem, on_delete=models.CASCADE, related_name="files", verbose_name=_("item"))
    path = models.CharField(_("path"), max_length=500)
    size_bytes = models.BigIntegerField(_("size (bytes)"))

    objects = HubFileQuerySet.as_manager()

    class Meta:
        verbose_name = _("hub file")
        verbose_name_plural = _("hub files")
        ordering = ["path"]
        constraints = [models.UniqueConstraint(fields=["item", "path"], name="hub_file_unique_path")]

    def __str__(self):
        return f"{self.item.repo}/{self.path}"


class HubLike(models.Model):
    """A user's like of a hub item: at most one per user and item; ``HubItem.likes_count`` caches the count."""

    item = models.ForeignKey(HubItem, on_delete=models.CASCADE, related_name="likes", verbose_name=_("item"))
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="hub_likes", verbose_name=_("user")
    )
    created_at = models.DateTimeField(_("liked at"), auto_now_add=True)

    objects = HubLikeQuerySet.as_manager()

    class Meta:
        verbose_name = _("hub like")
        verbose_name_plural = _("hub likes")
        constraints = [models.UniqueConstraint(fields=["item", "user"], name="hub_like_once_per_user")]

    def __str__(self):
        return f"{self.user} ♥ {self.item}"
