"""Billing tasks: thin wrappers that take ids and call the services. Beat runs the periodic ones."""

from celery import shared_task
from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from accounts.account_adapter import email_subject
from teams.accounts import recipients

from . import metering, vouchers, wallet
from .models import Notification


@shared_task(ignore_result=True)
def meter():
    """Charge every open usage session (every 60 s). Safe when two ticks overlap or a worker dies mid-tick."""
    metering.meter()


@shared_task(ignore_result=True)
def expire_trial_credits():
    """Book the expiry of trial credits past their date (hourly)."""
    wallet.expire_trial_credits()


@shared_task(ignore_result=True)
def expire_vouchers():
    """Move what is left on vouchers past their date to the operator's account (every ten minutes)."""
    vouchers.expire_vouchers()


@shared_task(ignore_result=True)
def email_notification(notification_id: int):
    """E-mail a billing notification once (a compare-and-set on ``emailed_at`` makes a retry harmless)."""
    now = timezone.now()
    if not Notification.objects.filter(pk=notification_id, emailed_at__isnull=True).update(emailed_at=now):
        return
    notification = Notification.objects.select_related("user").get(pk=notification_id)
    with translation.override(settings.LANGUAGE_CODE):
        subject = email_subject(notification.get_kind_display())
        path = notification.params.get("path")
        link = _("Open it: %(url)s") if path else _("Your wallet: %(url)s")
        body = notification.message + "\n\n" + link % {"url": settings.SITE_URL + (path or "/billing/")}
    to = recipients(notification.user)  # a team's wallet: the members whose role covers billing
    if to:
        send_mail(subject, body, None, to)
