"""Choices for prices, plans and subsidies."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class Eligibility(models.TextChoices):
    """Who may receive a subsidy programme's discount."""

    EVERYONE = "everyone", _("Everyone")
    VERIFIED_ENTERPRISE = "verified_enterprise", _("Verified enterprises")


class TermUnit(models.TextChoices):
    """Units a visitor can give a term in."""

    MINUTES = "minutes", _("minutes")
    HOURS = "hours", _("hours")
    DAYS = "days", _("days")
    MONTHS = "months", _("months (30 days)")


TERM_UNIT_MINUTES = {TermUnit.MINUTES: 1, TermUnit.HOURS: 60, TermUnit.DAYS: 1440, TermUnit.MONTHS: 43200}
