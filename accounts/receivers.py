"""Thin signal receivers: they only hand over to a service function."""

from allauth.account.signals import email_confirmed
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from . import services, students
from .models import StudentVerification


@receiver(email_confirmed)
def _email_confirmed(request, email_address, **kwargs):
    services.on_email_verified(email_address.user, email_address.email)


@receiver([post_save, post_delete], sender=StudentVerification)
def _student_verification_written(instance, **kwargs):
    students.forget(instance.user_id)
