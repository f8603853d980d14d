"""Accounts, API tokens, SSH keys, enterprise verification and the worker heartbeat."""

import uuid

from django.contrib.auth.models import AbstractUser, BaseUserManager
from django.db import models
from django.db.models import Q
from django.db.models.functions import Lower
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from .querysets import ApiTokenQuerySet, EnterpriseVerificationQuerySet, SSHKeyQuerySet


class UserManager(BaseUserManager):
    """Users log in with their e-mail address; there is no username."""

    use_in_migrations = True

    def _create_user(self, email, password, **extra):
        if not email:
            raise ValueError("An e-mail address is required.")
        user = self.model(email=self.normalize_email(email), **extra)
        user.set_password(password)
        user.save(using=self._db)
        return user

    def create_user(self, email, password=None, **extra):
        extra.setdefault("is_staff", False)
        extra.setdefault("is_superuser", False)
        return self._create_user(email, password, **extra)

    def create_superuser(self, email, password=None, **extra):
        extra.setdefault("is_staff", True)
        extra.setdefault("is_superuser", True)
        return self._create_user(email, password, **extra)


class User(AbstractUser):
    """A person with a console account, identified by e-mail."""

    username = None
    email = models.EmailField(_("e-mail address"), unique=True)
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # The console language the person last chose with the language switch ("" until then: the default). Their
    # machines' JupyterLab starts in it.
    language = models.CharField(_("language"), max_length=16, blank=True, default="")

    USERNAME_FIELD = "email"
    REQUIRED_FIELDS: list[str] = []

    objects = UserManager()

    class Meta:
        verbose_name = _("user")
        verbose_name_plural = _("users")

    def __str__(self):
        return self.email


class ApiToken(models.Model):
    """A named API token. Only a SHA-256 hash of the secret is stored; the visible prefix finds the row."""

    class Scope(models.TextChoices):
        READ = "read", _("Read only")
        READ_WRITE = "read_write", _("Read and write")

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(_("name"), max_length=64)
    scope = models.CharField(_("scope"), max_length=16, choices=Scope.choices, default=Scope.READ)
    # A token for one team: the API acts in that team (its instances, its wallet) and reaches nothing personal.
    team = models.ForeignKey(
        "teams.Team",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="api_tokens",
        verbose_name=_("team"),
    )
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    token_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True)
    revoked_at = models.DateTimeField(_("revoked"), null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        verbose_name = _("API token")
        verbose_name_plural = _("API tokens")
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @property
    def can_write(self) -> bool:
        return self.scope == self.Scope.READ_WRITE


class SSHKey(models.Model):
    """A public key its owner logs in with through the SSH gateway (``ssh -p 2222 <instance-id>@host``).

    Only public keys are stored, as one OpenSSH line; the SHA-256 fingerprint identifies the key at login and is
    unique per user. ``accounts.ssh_keys`` adds and removes them.
    """

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="ssh_keys")
    name = models.CharField(_("name"), max_length=100)
    public_key = models.TextField(_("public key"), editable=False)
    fingerprint = models.CharField(_("fingerprint"), max_length=64, editable=False)
    key_type = models.CharField(_("key type"), max_length=32, editable=False)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True)

    objects = SSHKeyQuerySet.as_manager()

    class Meta:
        verbose_name = _("SSH key")
        verbose_name_plural = _("SSH keys")
        ordering = ["-created_at", "-pk"]
        constraints = [models.UniqueConstraint(fields=["user", "fingerprint"], name="one_ssh_key_per_fingerprint")]

    def __str__(self):
        return f"{self.name} ({self.fingerprint})"


class WorkerHeartbeat(models.Model):
    """The last time each Celery worker ran the heartbeat task; /healthz reads it."""

    hostname = models.CharField(max_length=255, unique=True)
    beat_at = models.DateTimeField()
    beats = models.PositiveBigIntegerField(default=0)

    class Meta:
        verbose_name = _("worker heartbeat")
        verbose_name_plural = _("worker heartbeats")

    def __str__(self):
        return f"{self.hostname} @ {self.beat_at:%Y-%m-%d %H:%M:%S}"


class EnterpriseVerification(models.Model):
    """An application for enterprise verification (企业认证): the company, its licence number and a contact.

    Staff approve or reject it in the back office (``accounts.verification``); a rejection carries a reason the
    user sees. A user may have one pending application at a time and may apply again after a rejection; the
    latest application is their status. Some subsidy programmes are for verified enterprises only.
    """

    class Status(models.TextChoices):
        PENDING = "pending", _("Pending review")
        APPROVED = "approved", _("Approved")
        REJECTED = "rejected", _("Rejected")

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="enterprise_verifications")
    company_name = models.CharField(_("company name"), max_length=200)
    licence_number = models.CharField(
        _("unified social credit code"), max_length=18, help_text=_("The 18-character code on the business licence.")
    )
    contact_name = models.CharField(_("contact person"), max_length=100)
    contact_phone = models.CharField(_("contact phone"), max_length=32)
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.PENDING)
    reason = models.CharField(_("reason"), max_length=500, blank=True, help_text=_("Shown to the applicant."))
    submitted_at = models.DateTimeField(_("submitted"), default=timezone.now, editable=False)
    reviewed_by = models.ForeignKey(
        User, on_delete=models.PROTECT, null=True, blank=True, related_name="+", verbose_name=_("reviewed by")
    )
    reviewed_at = models.DateTimeField(_("reviewed"), null=True, blank=True)

    objects = EnterpriseVerificationQuerySet.as_manager()

    class Meta:
        verbose_name = _("enterprise verification")
        verbose_name_plural = _("enterprise verifications")
        ordering = ["-submitted_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["user"], condition=models.Q(status="pending"), name="one_pending_verification_per_user"
            ),
        ]
        indexes = [models.Index(fields=["status", "submitted_at"], name="verification_queue")]

    def __str__(self):
        return f"{self.company_name} ({self.licence_number}) · {self.status}"

    @property
    def badge(self) -> str:
        return {"pending": "warning", "approved": "success", "rejected": "danger"}[self.status]


# The back office's models (audit log, capacity snapshots) live in console/ops but belong to this app.
class RealNameVerification(models.Model):
    """A person's real-name verification (个人实名认证): the name and a keyed hash of the ID number, never the number.

    ``accounts.identity`` checks the number's form, asks the identity provider, and keeps only its hash (to refuse a
    second account with the same number) and its last four characters (shown masked). One number verifies one
    account.
    """

    class Document(models.TextChoices):
        MAINLAND_ID = "mainland_id", _("Mainland resident identity card")

    user = models.OneToOneField(User, on_delete=models.CASCADE, related_name="real_name")
    real_name = models.CharField(_("name"), max_length=60)
    document = models.CharField(_("document"), max_length=16, choices=Document.choices, default=Document.MAINLAND_ID)
    number_hash = models.CharField(max_length=64, unique=True, editable=False)
    number_last4 = models.CharField(max_length=4, editable=False)
    provider = models.CharField(max_length=40, editable=False)
    verified_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        verbose_name = _("real-name verification")
        verbose_name_plural = _("real-name verifications")

    def __str__(self) -> str:
        return f"{self.masked_name} {self.masked_number}"

    @property
    def masked_name(self) -> str:
        return self.real_name[:1] + "*" * max(len(self.real_name) - 1, 1)

    @property
    def masked_number(self) -> str:
        return "*" * 14 + self.number_last4


class StudentVerification(models.Model):
    """A student's verification (学生认证) through a university address under ``.edu.cn``: a code mailed there, typed
    back on the console. Verified, the account gets the student programme's prices for ``STUDENT_VERIFIED_DAYS``.
    Only a hash of the code is kept. One address verifies one account."""

    user = models.OneToOneField(User, on_delete=models.CASCADE, related_name="student_verification")
    email = models.EmailField(_("university address"), max_length=254, blank=True)
    pending_email = models.EmailField(max_length=254, blank=True, editable=False)  # the code went there
    code_hash = models.CharField(max_length=64, blank=True, editable=False)
    code_sent_at = models.DateTimeField(null=True, blank=True, editable=False)
    attempts = models.PositiveSmallIntegerField(default=0, editable=False)
    verified_at = models.DateTimeField(_("verified"), null=True, blank=True)
    expires_at = models.DateTimeField(_("valid until"), null=True, blank=True)

    class Meta:
        verbose_name = _("student verification")
        verbose_name_plural = _("student verifications")
        constraints = [
            models.UniqueConstraint(Lower("email"), condition=~Q(email=""), name="student_address_verifies_one_account")
        ]

    def __str__(self) -> str:
        return self.email

    def is_valid(self, at=None) -> bool:
        at = at or timezone.now()
        return self.verified_at is not None and (self.expires_at is None or self.expires_at > at)


from .ops.models import AuditEntry, CapacitySnapshot  # noqa: E402, F401
