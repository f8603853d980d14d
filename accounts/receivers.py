"""Thin signal receivers: they only hand over to a service function."""

from allauth.account.signals import email_confirmed
from django.dispatch import receiver

from . import services


@receiver(email_confirmed)
def _email_confirmed(request, email_address, **kwargs):
    services.on_email_verified(email_address.user, email_address.email)
