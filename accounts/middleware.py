"""Language selection.

Pages are in Simplified Chinese unless the user picked English with the switch (a cookie); the operator's
audience is Chinese, so a browser's Accept-Language does not override that. The API and the OpenAI-compatible
proxy answer in the request's language (cookie, then Accept-Language), as API clients expect; so do the Hugging
Face Hub API's addresses outside /api/ (downloads, LFS uploads).
"""

from django.conf import settings
from django.middleware.locale import LocaleMiddleware
from django.utils import translation
from django.utils.translation import trans_real

OPENAI_PREFIX = "/v1/"  # the OpenAI-compatible inference proxy
API_PREFIXES = ("/api/", OPENAI_PREFIX, "/hub-lfs/", "/hub-xet/")
HUB_API_MARKERS = ("/resolve/", ".git/info/lfs/")  # …/<org>/<name>/resolve/<rev>/<path>, …/<repo>.git/info/lfs/…


HUB_API_PREFIXES = (
    "/api/models",
    "/api/datasets",
    "/api/repos/",
    "/api/validate-yaml",
    "/api/whoami-v2",
    "/hub-lfs/",
    "/hub-xet/",
)


def is_hub_api(path: str) -> bool:
    """The Hugging Face Hub API's addresses (``marketplace/hub/hf_urls.py``): errors are ``{"error": …}`` there."""
    return path.startswith(HUB_API_PREFIXES) or any(marker in path for marker in HUB_API_MARKERS)


def is_api(path: str) -> bool:
    return path.startswith(API_PREFIXES) or is_hub_api(path)


class LanguageMiddleware(LocaleMiddleware):
    def process_request(self, request):
        if is_api(request.path):
            language = translation.get_language_from_request(request)
        else:
            language = request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME) or settings.LANGUAGE_CODE
            try:
                language = trans_real.get_supported_language_variant(language)
            except LookupError:
                language = settings.LANGUAGE_CODE
        translation.activate(language)
        request.LANGUAGE_CODE = translation.get_language()
