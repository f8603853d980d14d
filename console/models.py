"""Accounts, API tokens and the worker heartbeat."""

import uuid

from django.contrib.auth.models import AbstractUser, BaseUserManager
from django.db import models
from django.utils.translation import gettext_lazy as _

from .querysets import ApiTokenQuerySet


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
