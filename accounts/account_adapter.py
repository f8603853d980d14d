"""Account e-mail names the product, not the host that served the request.

Without the Sites framework allauth calls the site after the request's host ("127.0.0.1:8100"), so the
verification e-mail said "Hello from 127.0.0.1:8100" and its subject carried the host too. This adapter gives
every account e-mail the product's name (``SITE_NAME``, in the reader's language) and the public ``SITE_URL``.
"""

from dataclasses import dataclass

from allauth.account import app_settings
from allauth.account.adapter import DefaultAccountAdapter
from django.conf import settings
from django.utils.encoding import force_str
from django.utils.http import url_has_allowed_host_and_scheme


@dataclass(frozen=True)
class ProductSite:
    """What allauth's e-mail templates read as ``current_site``: the name and the address people know."""

    name: str
    domain: str


def product_site() -> ProductSite:
    return ProductSite(name=str(settings.SITE_NAME), domain=settings.SITE_URL)


def email_subject(subject) -> str:
    """Every e-mail's subject: ``EMAIL_SUBJECT_PREFIX`` if the operator set one, else "[SITE_NAME] "."""
    prefix = app_settings.EMAIL_SUBJECT_PREFIX
    if prefix is None:
        prefix = f"[{product_site().name}] "
    return prefix + force_str(subject)


# A page an anonymous visitor was sent from (a team invitation, say) puts its path here: after signing up, verifying
# the address and logging in, possibly in another tab, the first login lands back on it.
AFTER_LOGIN_SESSION_KEY = "after_login"


class AccountAdapter(DefaultAccountAdapter):
    def get_login_redirect_url(self, request) -> str:
        target = request.session.pop(AFTER_LOGIN_SESSION_KEY, "")
        if (
            isinstance(target, str)
            and target.startswith("/")
            and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()})
        ):
            return target
        return super().get_login_redirect_url(request)

    def format_email_subject(self, subject) -> str:
        return email_subject(subject)

    def send_mail(self, template_prefix: str, email: str, context: dict) -> None:
        super().send_mail(template_prefix, email, {**context, "current_site": product_site()})
