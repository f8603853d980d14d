"""The model & dataset hub: items (models and data sets), their files and users' likes.

The image marketplace lives beside these models (below); every hub name starts with ``Hub``, every
image name with ``Image``. Items are written only through ``marketplace.hub.services`` and images only through
``marketplace.images.services``, so that the search columns, the rendered Markdown and the counters stay in step
with what the item or image says.
"""

import uuid

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.db.models.functions import Lower
from django.urls import reverse
from django.utils.translation import get_language
from django.utils.translation import gettext_lazy as _

from instances.choices import Backend

from .choices import (
    CPU_ONLY,
    IMAGE_REVIEW_BADGES,
    MOUNT_ROOTS,
    HubKind,
    HubVisibility,
    ImageCategory,
    ImageReview,
    ImageStatus,
    ImportStep,
)
from .querysets import (
    HubFileQuerySet,
    HubItemQuerySet,
    HubLikeQuerySet,
    ImageQuerySet,
    ImageRatingQuerySet,
    ImageVariantQuerySet,
)


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
    head = models.ForeignKey(
        "HubCommit",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        editable=False,
        help_text=_("The default branch's latest commit; empty: the item has no files' bytes (metadata only)."),
    )
    taken_down_at = models.DateTimeField(_("taken down"), null=True, blank=True, editable=False)
    takedown_reason = models.CharField(_("takedown reason"), max_length=500, blank=True, editable=False)
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
    def is_listed(self) -> bool:
        """Everyone may see it: public and not taken down (the rows ``querysets.LISTED_ITEMS`` selects)."""
        return self.is_public and self.taken_down_at is None

    @property
    def mount_path(self) -> str:
        """Where the item appears, read-only, inside an instance that mounts it."""
        return f"{MOUNT_ROOTS[self.kind]}/{self.repo}"

    def summary_for(self, language: str) -> str:
        return self.summary_zh if language.startswith("zh") and self.summary_zh else self.summary

    @property
    def has_bytes(self) -> bool:
        """Whether its files can be downloaded: published with commits, not a catalogue entry of metadata only."""
        return self.head_id is not None


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


class HubNamespace(models.Model):
    """The first part of a repository name (``org`` in ``org/name``), claimed by the first user who publishes
    under it; platform catalogue organisations and other people's names cannot be taken."""

    name = models.CharField(_("namespace"), max_length=100, unique=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="hub_namespaces")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("hub namespace")
        verbose_name_plural = _("hub namespaces")
        constraints = [models.UniqueConstraint(Lower("name"), name="hub_namespace_unique_in_any_case")]

    def __str__(self):
        return self.name


class HubBlob(models.Model):
    """File content, stored once by its SHA-256 (``marketplace.hub.blobs``), whichever repositories hold it."""

    sha256 = models.CharField(max_length=64, unique=True)
    size = models.BigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("hub blob")
        verbose_name_plural = _("hub blobs")

    def __str__(self):
        return self.sha256


class HubBlobUpload(models.Model):
    """Who sent a blob's bytes: a commit may name a large file by its hash only when its author uploaded it, or
    the repository already holds it (a hash alone is not proof of having the content)."""

    blob = models.ForeignKey(HubBlob, on_delete=models.CASCADE, related_name="uploads")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["blob", "user"], name="hub_blob_upload_once")]

    def __str__(self):
        return f"{self.blob} by {self.user}"


class HubCommit(models.Model):
    """One commit of a published repository: a message, its author and parent, and the whole tree (its files)."""

    item = models.ForeignKey(HubItem, on_delete=models.CASCADE, related_name="commits")
    oid = models.CharField(_("commit id"), max_length=40, unique=True)
    parent = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    summary = models.CharField(_("message"), max_length=500)
    description = models.TextField(_("description"), blank=True)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    created_at = models.DateTimeField(_("committed"), auto_now_add=True)

    class Meta:
        verbose_name = _("hub commit")
        verbose_name_plural = _("hub commits")
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.item.repo}@{self.oid[:7]}"


class HubTreeFile(models.Model):
    """A file in a commit's tree. ``git_oid`` is the Git blob id (what a small file's ETag is); a large file
    (``lfs``) is known by its SHA-256."""

    commit = models.ForeignKey(HubCommit, on_delete=models.CASCADE, related_name="files")
    path = models.CharField(_("path"), max_length=500)
    blob = models.ForeignKey(HubBlob, on_delete=models.PROTECT, related_name="+")
    size = models.BigIntegerField()
    git_oid = models.CharField(max_length=40)
    lfs = models.BooleanField(default=False)

    class Meta:
        ordering = ["path"]
        constraints = [models.UniqueConstraint(fields=["commit", "path"], name="hub_tree_file_unique_path")]

    def __str__(self):
        return self.path

    @property
    def etag(self) -> str:
        return self.blob.sha256 if self.lfs else self.git_oid


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


# The image marketplace ---------------------------------------------------------------------------------

# Image and variant slugs carry versions ("pytorch-2.2-cann8"), so dots are allowed beside the usual slug characters.
SLUG_VALIDATOR = RegexValidator(
    r"^[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?$", _("Use lower-case letters, digits, “.”, “_” and “-”.")
)


class Image(models.Model):
    """A boot image in the marketplace (SPEC §7): one software stack with a variant per chip family it runs on.

    Platform images (``owner`` empty) are the official catalogue; users' images start private (saved from a
    stopped instance or cloned from another image) and are listed for everyone only after staff review. The
    description is Markdown, rendered sanitised into ``description_html`` by the hub's card renderer; official
    images also carry it in Chinese (``description_zh``), which Chinese pages show instead. Users' images have one
    description, shown as written in both languages (a clone keeps both texts of the image it copies).
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    slug = models.CharField(_("slug"), max_length=48, unique=True, validators=[SLUG_VALIDATOR])
    name = models.CharField(_("name (English)"), max_length=120)
    name_zh = models.CharField(_("name (Chinese)"), max_length=120, blank=True)
    summary = models.CharField(_("summary"), max_length=300, blank=True)
    summary_zh = models.CharField(_("summary (Chinese)"), max_length=300, blank=True)
    description = models.TextField(_("description (Markdown)"), blank=True)
    description_html = models.TextField(_("rendered description"), blank=True, editable=False)
    description_zh = models.TextField(_("description (Chinese, Markdown)"), blank=True)
    description_zh_html = models.TextField(_("rendered Chinese description"), blank=True, editable=False)
    publisher = models.CharField(_("publisher"), max_length=100)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="images",
        verbose_name=_("owner"),
        help_text=_("Empty for the platform's official images."),
    )
    category = models.CharField(
        _("category"), max_length=16, choices=ImageCategory.choices, default=ImageCategory.COMMUNITY
    )
    tags = models.JSONField(_("tags"), default=list, blank=True)
    frameworks = models.JSONField(
        _("framework versions"), default=list, blank=True, help_text=_("E.g. “MindSpore 2.3”, “CANN 8.0”.")
    )
    size_bytes = models.BigIntegerField(_("size (bytes)"), default=0)
    usage_count = models.PositiveIntegerField(_("launches"), default=0)
    rating_count = models.PositiveIntegerField(_("ratings"), default=0)
    rating_sum = models.PositiveIntegerField(default=0, editable=False)
    rating_average = models.DecimalField(_("average rating"), max_digits=3, decimal_places=2, default=0)
    review_state = models.CharField(_("review"), max_length=16, choices=ImageReview.choices, default=ImageReview.DRAFT)
    review_reason = models.CharField(_("review note"), max_length=500, blank=True)
    reviewed_at = models.DateTimeField(_("reviewed"), null=True, blank=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    published_at = models.DateTimeField(_("submitted for review"), null=True, blank=True)
    status = models.CharField(_("status"), max_length=16, choices=ImageStatus.choices, default=ImageStatus.READY)
    status_detail = models.CharField(_("status detail"), max_length=255, blank=True)
    source_instance = models.UUIDField(
        _("saved from instance"), null=True, blank=True, help_text=_("The public id of the instance it was saved from.")
    )
    cloned_from = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="clones", verbose_name=_("cloned from")
    )
    sort_order = models.PositiveSmallIntegerField(default=100)
    search_text = models.TextField(editable=False, blank=True)
    facet_text = models.TextField(editable=False, blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    objects = ImageQuerySet.as_manager()

    class Meta:
        verbose_name = _("image")
        verbose_name_plural = _("images")
        ordering = ["-usage_count", "sort_order", "-id"]
        indexes = [
            models.Index(fields=["review_state", "-usage_count"], name="image_listed_popular"),
            models.Index(fields=["owner", "-created_at"], name="image_owner_recent"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(owner__isnull=False) | models.Q(review_state=ImageReview.LISTED),
                name="platform_images_are_listed",
            ),
        ]

    def __str__(self):
        return self.slug

    def get_absolute_url(self):
        return reverse("marketplace:image", args=[self.slug])

    @property
    def label(self) -> str:
        """The name in the active language."""
        return self.name_zh if (get_language() or "").startswith("zh") and self.name_zh else self.name

    @property
    def summary_label(self) -> str:
        return self.summary_zh if (get_language() or "").startswith("zh") and self.summary_zh else self.summary

    @property
    def description_label_html(self) -> str:
        """The rendered description in the active language (the one description when there is no Chinese)."""
        if (get_language() or "").startswith("zh") and self.description_zh_html:
            return self.description_zh_html
        return self.description_html

    @property
    def is_listed(self) -> bool:
        return self.review_state == ImageReview.LISTED

    @property
    def is_ready(self) -> bool:
        return self.status == ImageStatus.READY

    @property
    def review_badge(self) -> str:
        return IMAGE_REVIEW_BADGES.get(self.review_state, "secondary")


class ImageVariant(models.Model):
    """One chip family's build of an image (``family`` empty: CPU only, for the no-card mode) with its software
    stack. Instances record the variant they boot by its ``slug``; ``instances.images`` resolves it."""

    image = models.ForeignKey(Image, on_delete=models.CASCADE, related_name="variants", verbose_name=_("image"))
    family = models.CharField(_("chip family"), max_length=8, choices=Backend.choices, blank=True)
    slug = models.CharField(_("slug"), max_length=64, unique=True, validators=[SLUG_VALIDATOR])
    os = models.CharField(_("operating system"), max_length=64)
    stack = models.JSONField(_("software stack"), default=list, blank=True)
    size_bytes = models.BigIntegerField(_("size (bytes)"), default=0)

    objects = ImageVariantQuerySet.as_manager()

    class Meta:
        verbose_name = _("image variant")
        verbose_name_plural = _("image variants")
        ordering = ["image", "family"]
        constraints = [models.UniqueConstraint(fields=["image", "family"], name="one_variant_per_family")]

    def __str__(self):
        return self.slug

    @property
    def is_cpu_only(self) -> bool:
        return self.family == CPU_ONLY

    @property
    def name(self) -> str:
        """What the wizard and the instance page call this variant: the image's name and the family's stack."""
        return self.image.label

    @property
    def choice_label(self) -> str:
        """How the launch wizard lists the variant: the image, its main software and its OS."""
        stack = " + ".join(self.stack[:2])
        return " · ".join(part for part in (self.image.label, stack, self.os) if part)

    @property
    def family_label(self) -> str:
        return str(Backend(self.family).label) if self.family else str(_("CPU only (no-card mode)"))


class ImageRating(models.Model):
    """A user's 1–5 star rating of an image they ran, with a comment; one per user and image (a new rating
    replaces the old). ``Image.rating_*`` cache the count and average."""

    image = models.ForeignKey(Image, on_delete=models.CASCADE, related_name="ratings", verbose_name=_("image"))
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="image_ratings", verbose_name=_("user")
    )
    stars = models.PositiveSmallIntegerField(_("stars"))
    comment = models.TextField(_("comment"), max_length=1000, blank=True)
    created_at = models.DateTimeField(_("rated"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    objects = ImageRatingQuerySet.as_manager()

    class Meta:
        verbose_name = _("image rating")
        verbose_name_plural = _("image ratings")
        ordering = ["-updated_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["image", "user"], name="one_rating_per_user"),
            models.CheckConstraint(condition=models.Q(stars__gte=1, stars__lte=5), name="rating_one_to_five_stars"),
        ]

    def __str__(self):
        return f"{self.user} → {self.image}: {self.stars}★"

    @property
    def stars_text(self) -> str:
        return "★" * self.stars + "☆" * (5 - self.stars)


class ImageEvent(models.Model):
    """An append-only row per review or status move of an image (old → new, why, by whom): the author's history
    and the staff audit read these."""

    image = models.ForeignKey(Image, on_delete=models.CASCADE, related_name="events", verbose_name=_("image"))
    old = models.CharField(_("from"), max_length=16, blank=True)
    new = models.CharField(_("to"), max_length=16)
    reason = models.CharField(_("reason"), max_length=500, blank=True)
    by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    at = models.DateTimeField(_("at"), auto_now_add=True)

    class Meta:
        verbose_name = _("image event")
        verbose_name_plural = _("image events")
        ordering = ["at", "id"]

    def __str__(self):
        return f"{self.image_id}: {self.old or '·'} → {self.new}"


class ImageImport(models.Model):
    """Where an imported image came from and what its files say: the registry reference it was copied from (or the
    path of the archive in the owner's cloud storage it was read from, for ``docker save`` and OCI archives), the
    registry's credentials (encrypted with ``core.encryption``; never shown again), the step the import has reached,
    the image's configuration (entrypoint, cmd, env, working dir, user, exposed ports) and what the checks of its
    files found (a shell, Python, JupyterLab, the chip family its libraries suggest, which the owner confirms or
    corrects: the variant's ``family``). The image itself is an ordinary ``Image`` with one variant, so the wizard,
    clone and the API take it as any other."""

    image = models.OneToOneField(Image, on_delete=models.CASCADE, related_name="imported", verbose_name=_("image"))
    reference = models.CharField(_("reference"), max_length=500, blank=True)
    archive = models.CharField(_("archive in cloud storage"), max_length=2048, blank=True)
    digest = models.CharField(_("manifest digest"), max_length=80, blank=True)
    username = models.CharField(_("registry user"), max_length=200, blank=True)
    password_encrypted = models.TextField(blank=True, editable=False)
    step = models.CharField(_("step"), max_length=16, choices=ImportStep.choices, default=ImportStep.QUEUED)
    config = models.JSONField(_("image configuration"), default=dict, blank=True)
    checks = models.JSONField(_("what the files hold"), default=dict, blank=True)
    neutralised = models.JSONField(_("files made safe"), default=dict, blank=True)
    family_confirmed = models.BooleanField(
        _("chip family confirmed"),
        default=False,
        help_text=_("Whether the owner confirmed the chip family (until then it is the one its libraries suggest)."),
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)

    class Meta:
        verbose_name = _("image import")
        verbose_name_plural = _("image imports")

    def __str__(self):
        return self.reference or self.archive

    @property
    def tag(self) -> str:
        """The image's name in the shared OCI layout (its public id), which nothing a user types can collide with."""
        return self.image.public_id.hex
