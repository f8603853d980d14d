"""Notification tasks: thin, take ids, call the services. Beat retries the due deliveries every minute."""

from celery import shared_task

from . import services


@shared_task(ignore_result=True)
def deliver_notification(notification_id: int):
    """Send a new notification to its owner's channels (safe to run twice: one delivery per channel)."""
    services.fan_out(notification_id)


@shared_task(ignore_result=True)
def retry_deliveries():
    """Attempt the deliveries whose backoff has passed (every minute; claims make overlapping ticks harmless)."""
    services.retry_due()


def enqueue_delivery(notification_id: int) -> None:
    """Billing's listener: called after the notification's transaction commits, it queues the delivery."""
    deliver_notification.delay(notification_id)
