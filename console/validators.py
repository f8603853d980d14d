"""Password validators whose messages are translated in both of our languages."""

from django.contrib.auth import password_validation
from django.utils.translation import ngettext


class MinimumLengthValidator(password_validation.MinimumLengthValidator):
    # Django 5.2's own message changed its msgid without the Chinese catalogue following, so it would show
    # in English on a Chinese page; this one is in our catalogue.
    def get_error_message(self):
        return ngettext(
            "This password is too short: use at least %(n)d character.",
            "This password is too short: use at least %(n)d characters.",
            self.min_length,
        ) % {"n": self.min_length}
