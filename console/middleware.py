"""Language selection.

Pages are in Simplified Chinese unless the user picked English with the switch (a cookie); the operator's
audience is Chinese, so a browser's Accept-Language does not override that. The API and the OpenAI-compatible
proxy answer in the request's language (cookie, then Accept-Language), as API clients expect.
"""

from django.conf import settings
from django.middleware.locale import LocaleMiddleware
from django.utils import translation
from django.utils.translation import trans_real

OPENAI_PREFIX = "/v1/"  # the OpenAI-compatible inference proxy
API_PREFIXES = ("/api/", OPENAI_PREFIX)


class LanguageMiddleware(LocaleMiddleware):
    def process_request(self, request):
        if request.path.startswith(API_PREFIXES):
            language = translation.get_language_from_request(request)
        else:
            language = request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME) or settings.LANGUAGE_CODE
            try:
                language = trans_real.get_supported_language_variant(language)
            except LookupError:
                language = settings.LANGUAGE_CODE
        translation.activate(language)
        request.LANGUAGE_CODE = translation.get_language()
