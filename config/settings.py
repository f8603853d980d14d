"""Settings for the GPU cloud console.

One module, configured from environment variables with typed helpers (django-environ). Secrets may come
from files: ``SECRET_KEY_FILE=/run/secrets/key`` is read in place of ``SECRET_KEY``.

``DJANGO_ENV`` picks the mode:

* ``development`` (default): safe to run on a laptop. SQLite, an embedded Celery broker on the local disk,
  console e-mail, the simulated compute backend.
* ``production``: refuses to start without ``SECRET_KEY``, ``ALLOWED_HOSTS``, a PostgreSQL ``DATABASE_URL``, a
  Redis ``CELERY_BROKER_URL`` and a shared ``CACHE_URL``; turns on HTTPS-only cookies, HSTS and the rest of
  ``manage.py check --deploy``.
"""

import os
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _

from config.broker import filesystem_transport_options
from instances.schedule import BEAT_SCHEDULE as INSTANCES_BEAT_SCHEDULE

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.FileAwareEnv()

DJANGO_ENV = env.str("DJANGO_ENV", default="development")
if DJANGO_ENV not in {"development", "production"}:
    raise ImproperlyConfigured(f"DJANGO_ENV must be 'development' or 'production', not {DJANGO_ENV!r}.")
PRODUCTION = DJANGO_ENV == "production"

# Where the embedded default keeps its SQLite file, broker folders, uploads and logs.
DATA_DIR = Path(env.str("DATA_DIR", default=str(BASE_DIR / "var")))


def _require(name: str) -> None:
    if PRODUCTION and not env.str(name, default="") and not env.str(f"{name}_FILE", default=""):
        raise ImproperlyConfigured(f"Production settings need {name} (or {name}_FILE).")


for _name in ("SECRET_KEY", "ALLOWED_HOSTS", "DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL"):
    _require(_name)

DEBUG = env.bool("DEBUG", default=not PRODUCTION)
if PRODUCTION and DEBUG:
    raise ImproperlyConfigured("DEBUG must be off in production.")

SECRET_KEY = env.str("SECRET_KEY", default="development-only-key-not-for-production-use-0123456789abcdef")
# Former keys, still accepted: sessions and signatures made with them, and users' secrets encrypted under them
# (core/encryption.py), keep working while SECRET_KEY is rotated.
SECRET_KEY_FALLBACKS = env.list("SECRET_KEY_FALLBACKS", default=[])
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]", "testserver"])
# Each instance's JupyterLab answers on an origin of its own, <instance-id>.<LAB_DOMAIN> on the console's port, so
# nothing that runs in a lab can act on the console as its user (instances/jupyter_proxy.py). Browsers take every
# *.localhost name to this machine; a deployment names a wildcard domain that points at the console (ideally not a
# subdomain of the console's own, like GitHub's githubusercontent.com), with a wildcard certificate.
LAB_DOMAIN = env.str("LAB_DOMAIN", default="lab.localhost").strip(".").lower()
LAB_SESSION_SECONDS = env.int("LAB_SESSION_SECONDS", default=12 * 3600)  # a lab's cookie, before the console again
LAB_AUTH_CACHE_SECONDS = env.float("LAB_AUTH_CACHE_SECONDS", default=5)  # how long a lab trusts its last look-up
# Every open SSH session, lab websocket (kernels, terminals, exposed ports) and streamed lab answer looks its access up
# again this often, from the database, and ends once it no longer holds: a member removed or demoted, a key deleted,
# an account suspended, a console session signed out or an instance stopped is out within about this long.
ACCESS_RECHECK_SECONDS = env.float("ACCESS_RECHECK_SECONDS", default=2)
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
SITE_URL = env.str("SITE_URL", default="http://127.0.0.1:8000")
# Personal real-name verification (accounts/identity.py): who confirms a name and ID number, and which actions need
# it: "topup" (a top-up over REAL_NAME_TOPUP_LIMIT yuan), "team" (creating a team) and "endpoint" (publishing an
# inference endpoint).
IDENTITY_PROVIDER = env.str("IDENTITY_PROVIDER", default="accounts.identity.DevelopmentProvider")
# Keys the fingerprint that keeps one ID number to one account; it must never change once numbers are verified.
IDENTITY_HASH_KEY = env.str("IDENTITY_HASH_KEY", default=SECRET_KEY)
REAL_NAME_REQUIRED_FOR = env.list("REAL_NAME_REQUIRED_FOR", default=["topup"])
REAL_NAME_TOPUP_LIMIT = env.str("REAL_NAME_TOPUP_LIMIT", default="1000")
# How long a student verification (a code mailed to a .edu.cn address) keeps the student programme's prices.
STUDENT_VERIFIED_DAYS = env.int("STUDENT_VERIFIED_DAYS", default=365)
# How long a team invitation's link works.
TEAM_INVITATION_DAYS = env.int("TEAM_INVITATION_DAYS", default=7)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "crispy_forms",
    "crispy_bootstrap5",
    "allauth",
    "allauth.account",
    "accounts",  # its app label stays "console": its tables, migrations and permissions keep their names
    "catalog",
    "instances",
    "marketplace",
    "billing",
    "storage",
    "inference",
    "jobs",
    "teams",
    "notifications",
    "backoffice",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    # WhiteNoise, able to run in async mode: under uvicorn no middleware puts a request on a thread.
    "core.static_middleware.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "accounts.middleware.LanguageMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "allauth.account.middleware.AccountMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "accounts.context_processors.navigation",
                "teams.context.context_processor",
            ],
            "builtins": ["template_partials.templatetags.partials", "core.template_filters"],
        },
    }
]
CRISPY_ALLOWED_TEMPLATE_PACKS = "bootstrap5"
CRISPY_TEMPLATE_PACK = "bootstrap5"

# Database: SQLite on the local disk by default; DATABASE_URL=postgres://… in production.
DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{DATA_DIR / 'db.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    if PRODUCTION:
        raise ImproperlyConfigured("Production needs DATABASE_URL to point at PostgreSQL, not SQLite.")
    # Web, worker and beat share the file: WAL lets readers run beside a writer, and IMMEDIATE transactions
    # take the write lock up front so two processes never deadlock upgrading a read lock.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    # Tests use a file, not :memory:, so a real worker process can see the test database.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test-db.sqlite3")}
# Connections are kept between requests (opening one costs more than a small page: on SQLite the pragmas above
# and Django's functions are set up on every connection), and checked before reuse.
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
if (
    DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
    and DATABASES["default"]["CONN_MAX_AGE"] == 0
    and os.environ.get("GPUCLOUD_ASGI_PROCESS") == "1"  # set by config.asgi while it reads these settings
    and env.bool("DATABASE_POOL", default=True)
):
    # The web process under ASGI closes its connection after each request; it hands it back to a pool of open
    # connections (psycopg's, through Django) instead: a new PostgreSQL connection (a backend forked, authenticated,
    # its time zone set) costs more than most pages. Workers and commands keep their one connection (CONN_MAX_AGE).
    _pool_size = env.int("DATABASE_POOL_SIZE", default=20)
    if _pool_size < 1:
        raise ImproperlyConfigured("DATABASE_POOL_SIZE must be at least 1.")
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": min(2, _pool_size),
        "max_size": _pool_size,
        # How long a request waits for a free connection before it fails (a database that is down fails as fast).
        "timeout": env.float("DATABASE_POOL_TIMEOUT", default=10),
    }
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DATABASES["default"]["ATOMIC_REQUESTS"] = False
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CACHES = {"default": env.cache_url("CACHE_URL", default="locmemcache://gpucloud")}
if PRODUCTION and "LocMemCache" in CACHES["default"]["BACKEND"]:
    raise ImproperlyConfigured("Production needs a shared CACHE_URL (redis://…) for rate limits.")
# Page parts each process keeps for itself ({% cache … using="local" %}), with no round trip to a shared cache: those
# keyed by everything they show (a deploy, which starts new processes, is the only change the frame's menus and
# links see; an image's parts name its generation and last change).
CACHES["local"] = {
    "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
    "LOCATION": "local-parts",
    "OPTIONS": {"MAX_ENTRIES": 2000},
}

AUTH_USER_MODEL = "console.User"
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
]
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.Argon2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "core.validators.MinimumLengthValidator", "OPTIONS": {"min_length": 8}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "account_login"
LOGIN_REDIRECT_URL = "console:dashboard"
LOGOUT_REDIRECT_URL = "home"

# Accounts (django-allauth): e-mail + password, verified e-mail before login, rate limits per IP and per key.
ACCOUNT_LOGIN_METHODS = {"email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "password1*", "password2*"]
ACCOUNT_USER_MODEL_USERNAME_FIELD = None
ACCOUNT_EMAIL_VERIFICATION = "mandatory"
ACCOUNT_UNIQUE_EMAIL = True
# After confirming, people log in with their password (often on another device than the one that signed up).
ACCOUNT_LOGIN_ON_EMAIL_CONFIRMATION = False
ACCOUNT_LOGOUT_ON_PASSWORD_CHANGE = False
# Account e-mail names the product (SITE_NAME) in the reader's language; EMAIL_SUBJECT_PREFIX overrides the subject's.
ACCOUNT_ADAPTER = "accounts.account_adapter.AccountAdapter"
ACCOUNT_EMAIL_SUBJECT_PREFIX = env.str("EMAIL_SUBJECT_PREFIX", default=None)
ACCOUNT_DEFAULT_HTTP_PROTOCOL = "https" if PRODUCTION else "http"
ACCOUNT_RATE_LIMITS = {
    "login": env.str("RATE_LIMIT_LOGIN", default="30/m/ip"),
    "login_failed": env.str("RATE_LIMIT_LOGIN_FAILED", default="10/m/ip,5/5m/key"),
    "signup": env.str("RATE_LIMIT_SIGNUP", default="10/h/ip"),
    "confirm_email": "1/3m/key",
    "reset_password": "20/m/ip,5/m/key",
    "reset_password_from_key": "20/m/ip",
    "change_password": "5/m/user",
}

EMAIL_CONFIG = env.email_url("EMAIL_URL", default="smtp://localhost:25" if PRODUCTION else "consolemail://")
vars().update(EMAIL_CONFIG)
# The sender a person sees is the product's Chinese name, as on every page (Django encodes it for the header).
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="信创算力云 <noreply@gpucloud.local>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL

# Languages: Simplified Chinese by default, English by the switch in the header.
LANGUAGE_CODE = "zh-hans"
LANGUAGES = [("zh-hans", "简体中文"), ("en", "English")]
LOCALE_PATHS = [BASE_DIR / "locale"]
# The language chosen with the switch is kept for a year, not forgotten when the browser closes.
LANGUAGE_COOKIE_AGE = 365 * 24 * 60 * 60
TIME_ZONE = env.str("TIME_ZONE", default="Asia/Shanghai")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
MEDIA_URL = "media/"
MEDIA_ROOT = Path(env.str("MEDIA_ROOT", default=str(DATA_DIR / "media")))
# Uploaded files and their folders are the console's user's alone (Django's default would make files 0644).
FILE_UPLOAD_PERMISSIONS = 0o600
FILE_UPLOAD_DIRECTORY_PERMISSIONS = 0o700
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if PRODUCTION
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = not PRODUCTION

# Celery: the embedded default is kombu's filesystem transport (no server; several worker and beat processes
# share the folder), production is Redis. Tasks write their outcome to the database, so no result backend.
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    if PRODUCTION:
        raise ImproperlyConfigured("Production needs CELERY_BROKER_URL=redis://…, not the embedded broker.")
    CELERY_BROKER_TRANSPORT_OPTIONS = filesystem_transport_options(DATA_DIR / "broker")
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
WORKER_HEARTBEAT_SECONDS = env.int("WORKER_HEARTBEAT_SECONDS", default=5)
# A worker whose last heartbeat is older than this is reported dead on /healthz.
WORKER_HEARTBEAT_STALE_SECONDS = env.int("WORKER_HEARTBEAT_STALE_SECONDS", default=30)
CELERY_BEAT_SCHEDULE = {
    "worker-heartbeat": {"task": "accounts.tasks.heartbeat", "schedule": WORKER_HEARTBEAT_SECONDS},
}

# Cloud storage (云存储): each user's files. Local disk under MEDIA_ROOT/cloudstorage by default; STORAGE=s3 puts
# the bytes in an S3-compatible bucket through django-storages. Uploads in progress are staged on local disk.
STORAGE = env.str("STORAGE", default="local")
# With STORAGE=s3 each account's files are also a folder on this host: its prefix of the bucket mounted with rclone
# (storage/s3mount.py), which the console and the account's machines use. Empty: not mounted (the machines do not
# see the bucket's files, and files uploaded are kept under opaque keys).
STORAGE_S3_MOUNT_ROOT = env.str("STORAGE_S3_MOUNT_ROOT", default=str(DATA_DIR / "cloudstorage-s3"))
STORAGE_S3_PROVIDER = env.str("STORAGE_S3_PROVIDER", default="Other")  # rclone's name: AWS, Minio, Ceph, ...
STORAGE_S3_WRITE_BACK_SECONDS = env.int("STORAGE_S3_WRITE_BACK_SECONDS", default=5)
STORAGE_S3_DIR_CACHE_SECONDS = env.int("STORAGE_S3_DIR_CACHE_SECONDS", default=30)
if STORAGE == "s3":
    STORAGES["cloudstorage"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": env.str("S3_BUCKET"),
            "endpoint_url": env.str("S3_ENDPOINT_URL", default=None),
            "region_name": env.str("S3_REGION", default=None),
            "access_key": env.str("AWS_ACCESS_KEY_ID", default=None),
            "secret_key": env.str("AWS_SECRET_ACCESS_KEY", default=None),
            "location": env.str("S3_PREFIX", default="cloudstorage"),
            "default_acl": "private",
            "querystring_auth": True,
            "file_overwrite": False,
        },
    }
    # The hub's published files, content-addressed by SHA-256, beside the users' files in the same bucket.
    STORAGES["hub"] = {
        "BACKEND": STORAGES["cloudstorage"]["BACKEND"],
        "OPTIONS": STORAGES["cloudstorage"]["OPTIONS"] | {"location": env.str("S3_HUB_PREFIX", default="hub")},
    }
elif STORAGE == "local":
    STORAGES["cloudstorage"] = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(MEDIA_ROOT / "cloudstorage"), "base_url": None},
    }
    # A hub blob is hard-linked into the folders machines mount read-only (LOCAL_HUB_ROOT), so the file itself is
    # readable by all; its folders here are the console's alone, so no other host user can reach it by its path.
    STORAGES["hub"] = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {
            "location": str(MEDIA_ROOT / "hub"),
            "base_url": None,
            "file_permissions_mode": 0o644,
            "directory_permissions_mode": 0o700,
        },
    }
else:
    raise ImproperlyConfigured(f"STORAGE must be 'local' or 's3', not {STORAGE!r}.")
STORAGE_STAGING_DIR = Path(env.str("STORAGE_STAGING_DIR", default=str(DATA_DIR / "uploads")))
# The Hugging Face Hub API: files at least this large are uploaded through the LFS batch API (as huggingface.co
# does at 10 MB); the largest file and the largest commit body of small files accepted.
HUB_LFS_THRESHOLD_BYTES = env.int("HUB_LFS_THRESHOLD_BYTES", default=10 * 1024 * 1024)
HUB_MAX_FILE_BYTES = env.int("HUB_MAX_FILE_BYTES", default=50 * 1024**3)
HUB_MAX_COMMIT_BYTES = env.int("HUB_MAX_COMMIT_BYTES", default=100 * 1024 * 1024)
STORAGE_FREE_GB = env.float("STORAGE_FREE_GB", default=50)
STORAGE_MAX_GB = env.float("STORAGE_MAX_GB", default=500)
# With STORAGE=s3: rclone's cache of what is being written, per account, on a sparse image of its own of this size
# (what one account may have in flight to the bucket at once, and so the largest file it can write).
STORAGE_S3_CACHE_GB = env.float("STORAGE_S3_CACHE_GB", default=STORAGE_MAX_GB)
# Per-user limits on cloud disks, set by the operator: how many live disks, and how many GB in all.
DISK_MAX_PER_USER = env.int("DISK_MAX_PER_USER", default=20)
DISK_MAX_TOTAL_GB = env.int("DISK_MAX_TOTAL_GB", default=64 * 1024)
# Container images imported from registries: one OCI layout whose blobs (stored once by digest) all images share,
# and each image's unpacked root file system beside it. A manifest or config larger than these is refused. A registry
# on a private, loopback or link-local address is refused; IMAGE_IMPORT_ALLOW_LOOPBACK lets a registry on the host's
# own loopback through (the tests' local registry, without TLS) and is never on in production.
IMAGE_IMPORT_ROOT = Path(env.str("IMAGE_IMPORT_ROOT", default=str(DATA_DIR / "images")))
IMAGE_IMPORT_ALLOW_LOOPBACK = env.bool("IMAGE_IMPORT_ALLOW_LOOPBACK", default=False)
if PRODUCTION and IMAGE_IMPORT_ALLOW_LOOPBACK:
    raise ImproperlyConfigured("IMAGE_IMPORT_ALLOW_LOOPBACK is for tests; production never imports from its loopback.")
IMAGE_MAX_MANIFEST_BYTES = env.int("IMAGE_MAX_MANIFEST_BYTES", default=1024 * 1024)
IMAGE_MAX_CONFIG_BYTES = env.int("IMAGE_MAX_CONFIG_BYTES", default=1024 * 1024)
IMAGE_IMPORT_TIMEOUT_SECONDS = env.int("IMAGE_IMPORT_TIMEOUT_SECONDS", default=3600)
# The most one imported image may take, packed and unpacked, whatever its owner's storage has left: an image whose
# manifest declares more is refused before a layer is downloaded.
IMAGE_IMPORT_MAX_GB = env.float("IMAGE_IMPORT_MAX_GB", default=100)
STORAGE_UPLOAD_EXPIRY_HOURS = env.int("STORAGE_UPLOAD_EXPIRY_HOURS", default=24)
CELERY_BEAT_SCHEDULE["storage-expire-uploads"] = {"task": "storage.tasks.expire_uploads", "schedule": 3600}
CELERY_BEAT_SCHEDULE["storage-charge-daily"] = {"task": "storage.tasks.charge_storage_daily", "schedule": 3600}

# Billing: the trial credit, arrears, Stripe top-ups. With no Stripe keys in development a sandbox
# checkout (no real money) stands in; production refuses the sandbox and `check` fails without the keys.
# Fapiao: the e-invoice service finance issues through (a dotted path; empty: by hand). Development uses the
# simulated one, whose PDFs say SIMULATED; production has none until a real one is configured.
EINVOICE_PROVIDER = env.str("EINVOICE_PROVIDER", default="" if PRODUCTION else "billing.einvoice.SimulatedProvider")
TRIAL_CREDIT_CNY = env.str("TRIAL_CREDIT_CNY", default="10")
TRIAL_CREDIT_DAYS = env.int("TRIAL_CREDIT_DAYS", default=30)
ARREARS_RETENTION_DAYS = env.int("ARREARS_RETENTION_DAYS", default=15)
# How many billed minutes the metering tick gathers into one ledger posting per session (1: a posting a minute; 5
# lets one PostgreSQL meter 100,000 running instances in under 10 s a tick). Whoever is within an hour of spend of
# zero, has a spending cap, runs under a member budget, or holds trial credit or a voucher about to expire is posted
# every minute whatever this says, and a wallet lowered by anything else (a refund clawed back, a staff debit,
# storage) is looked at by the next tick, so nobody runs past zero, a cap or a budget for longer than a minute.
METERING_POSTING_MINUTES = env.int("METERING_POSTING_MINUTES", default=5)
if not 1 <= METERING_POSTING_MINUTES <= 60:
    raise ImproperlyConfigured("METERING_POSTING_MINUTES must be between 1 and 60.")
# How long a stopped instance keeps its system disk before it is released (reminders 3 days and 1 day before).
STOPPED_RELEASE_DAYS = env.int("STOPPED_RELEASE_DAYS", default=15)
STRIPE_SECRET_KEY = env.str("STRIPE_SECRET_KEY", default="")
STRIPE_WEBHOOK_SECRET = env.str("STRIPE_WEBHOOK_SECRET", default="")
STRIPE_PAYMENT_METHODS = env.list("STRIPE_PAYMENT_METHODS", default=["card", "alipay"])
TOPUP_MIN_CNY = env.str("TOPUP_MIN_CNY", default="10")
TOPUP_MAX_CNY = env.str("TOPUP_MAX_CNY", default="50000")
TOPUP_RATE_LIMIT = env.str("TOPUP_RATE_LIMIT", default="10/h")  # checkouts a user may start per window (s/m/h/d)
CELERY_BEAT_SCHEDULE["billing-meter"] = {"task": "billing.tasks.meter", "schedule": 60}
CELERY_BEAT_SCHEDULE["billing-expire-trial-credits"] = {"task": "billing.tasks.expire_trial_credits", "schedule": 3600}
CELERY_BEAT_SCHEDULE["marketplace-sweep-hub-blobs"] = {"task": "marketplace.tasks.sweep_hub_blobs", "schedule": 3600}
CELERY_BEAT_SCHEDULE["billing-expire-vouchers"] = {"task": "billing.tasks.expire_vouchers", "schedule": 600}
CELERY_BEAT_SCHEDULE |= INSTANCES_BEAT_SCHEDULE  # reconcile every 15 s, housekeeping every minute
CELERY_BEAT_SCHEDULE["notifications-retry"] = {"task": "notifications.tasks.retry_deliveries", "schedule": 60}
# Notification webhooks go to public HTTPS addresses only; development may also post to a receiver on localhost.
NOTIFICATIONS_ALLOW_LOOPBACK = env.bool("NOTIFICATIONS_ALLOW_LOOPBACK", default=DEBUG)
if PRODUCTION and NOTIFICATIONS_ALLOW_LOOPBACK:
    raise ImproperlyConfigured("NOTIFICATIONS_ALLOW_LOOPBACK must be off in production.")
# Inference endpoints idle for their scale-to-zero minutes stop (the next request starts them).
CELERY_BEAT_SCHEDULE["inference-scale-to-zero"] = {"task": "inference.tasks.scale_endpoints_to_zero", "schedule": 60}
# Jobs: queued ones are placed within seconds of a card freeing, and a finished job's machine is released at once.
JOBS_TICK_SECONDS = env.float("JOBS_TICK_SECONDS", default=2.0)
CELERY_BEAT_SCHEDULE["jobs-tick"] = {"task": "jobs.tasks.tick", "schedule": JOBS_TICK_SECONDS}
CELERY_BEAT_SCHEDULE["ops-capacity-snapshot"] = {"task": "backoffice.tasks.record_capacity_snapshot", "schedule": 300}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.api.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "accounts.api.permissions.TokenScopePermission",
    ],
    "DEFAULT_PARSER_CLASSES": [
        "core.api.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"]
    + ([] if PRODUCTION else ["rest_framework.renderers.BrowsableAPIRenderer"]),
    "DEFAULT_SCHEMA_CLASS": "core.api.schema.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "core.api.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "core.api.errors.exception_handler",
    "DEFAULT_THROTTLE_RATES": {"user": env.str("API_RATE_LIMIT", default="600/min")},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU Cloud API",
    "DESCRIPTION": "The console's REST API: everything a user does in the console, under /api/v1/.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    # OpenAPI 3.0: core.api.schema's AutoSchema and hooks read a nullable field by 3.0's `nullable`, which 3.1
    # writes as a type list instead. A rule JSON Schema has and 3.0 has not is written as an `x-` extension.
    "OAS_VERSION": "3.0.3",
    # Choice sets that share a field name get names of their own in the schema.
    "ENUM_NAME_OVERRIDES": {
        "InvoiceKindEnum": "billing.models.Invoice.Kind",
        "BackendEnum": "catalog.choices.Backend",
        "JobBackendEnum": "jobs.choices.JobBackend",
        "ChannelKindEnum": "notifications.choices.ChannelKind",
        "DeliveryStatusEnum": "notifications.choices.DeliveryStatus",
        "InstanceStatusEnum": "instances.choices.Status",
        "ImageStatusEnum": "marketplace.choices.ImageStatus",
        "NotificationKindEnum": "billing.choices.NotificationKind",
        "JobStateEnum": "jobs.choices.State",
        "WaitingLaunchStateEnum": "instances.models.WaitingLaunch.State",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "core.api.schema.document_errors",
        "core.api.schema.document_empty_query_values",
        "core.api.schema.document_form_bodies",
    ],
}

# Security headers; the HTTPS-only parts are on in production.
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp 4): everything from this origin only — no inline scripts, no style=""
# attributes, no eval, no CDN. Bootstrap's CSS draws some icons as data: SVGs.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}
SESSION_COOKIE_HTTPONLY = True
# Sessions in the database, read through the cache when the cache is shared by every process (Redis): a session
# ended in one process is then gone for all. A per-process cache (the embedded default's) would let another process
# keep a logged-out session alive, so there the database alone holds them.
SESSION_ENGINE = (
    "django.contrib.sessions.backends.db"
    if "LocMemCache" in CACHES["default"]["BACKEND"]
    else "django.contrib.sessions.backends.cached_db"
)
if PRODUCTION:
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env.bool("BEHIND_PROXY", True) else None
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    # httpx logs every request the proxies make (each JupyterLab request) at INFO.
    "loggers": {"django.db.backends": {"level": "INFO"}, "httpx": {"level": "WARNING"}},
}

# Demo account created by `make run` (development only).
DEMO_EMAIL = env.str("DEMO_EMAIL", default="demo@gpucloud.local")
DEMO_PASSWORD = env.str("DEMO_PASSWORD", default="xinchuang-demo-2026")

PRODUCT_NAME = _("Xinchuang GPU Cloud")
# The name account e-mail signs with: the product's (translated) unless the operator sets one.
SITE_NAME = env.str("SITE_NAME", default="") or PRODUCT_NAME
ADMIN_URL = env.str("ADMIN_URL", default="admin/")

# The Slurm compute backend. Cluster-wide values; SLURM_ZONES overrides them per zone. A zone runs on
# Slurm when its nodes say backend_name="slurm" (`manage.py use_slurm`, run by `make run BACKEND=slurm`).
# The console talks to slurmrestd as SLURM_USER with SLURM_JWT (or SLURM_JWT_FILE), or signs its own tokens with
# the cluster's HS256 key (SLURM_JWT_KEY_FILE, readable by the console's user only). Each owner's jobs run as their
# own unix account, SLURM_JOB_USER_TEMPLATE with {owner} the owner's id, so no tenant can read another's processes,
# secrets or files; the console creates a missing account (uid and gid SLURM_JOB_UID_BASE + the owner's id) when
# the base is set; else the accounts come from the cluster's directory (LDAP/SSSD). Either way the console (worker
# and SSH gateway) runs as root: it hands the accounts their folders.
# An empty template runs every job as SLURM_USER: a shared account, where launches with secrets are refused.
SLURM = {
    "rest_url": env.str("SLURM_REST_URL", default="http://127.0.0.1:6820"),
    "api_version": "v0.0.38",
    "user": env.str("SLURM_USER", default="gpucloud"),
    "job_user_template": env.str("SLURM_JOB_USER_TEMPLATE", default="gpucloud-u{owner}"),
    "job_uid_base": env.int("SLURM_JOB_UID_BASE", default=0 if PRODUCTION else 1_500_000_000),
    "token": env.str("SLURM_JWT", default=""),
    "jwt_key_file": env.str("SLURM_JWT_KEY_FILE", default="/var/lib/slurm/slurmctld/jwt_hs256.key"),
    "partition": "xinchuang",
    "spot_partition": "spot",
    # Always a typed GRES: an untyped gpu:N request mixes chips on a shared node.
    "gres_types": {"ascend-910b": "ascend910b", "mlu370-x8": "mlu370", "dcu-z100": "z100", "a800-80g": "a800"},
    # The first GRES index of each type on a node (the local cluster numbers all 32 fake cards in one row).
    "gres_offsets": {"a800": 0, "ascend910b": 8, "mlu370": 16, "z100": 24},
    # The device files of each type's cards that a machine booted from an imported image gets: "{index}" is a card's
    # number among the node's cards of its type (as the vendor's driver numbers them), "{gres_index}" its GRES index
    # on the node; a path with neither is bound when present. None in production until set for the nodes: an Ascend
    # node's are ["/dev/davinci{index}", "/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"], a Cambricon
    # one's ["/dev/cambricon_dev{index}", "/dev/cambricon_ctl"]. The local cluster's cards are files in one row.
    "card_devices": {}
    if PRODUCTION
    else {kind: ["/var/lib/slurm/fakegpu/accel{gres_index}"] for kind in ("a800", "ascend910b", "mlu370", "z100")},
    # Shared by every node of the zone: instances/<id> (system disks), disks/<id>, shared/<user>, hub/<repo>.
    "root": env.str("SLURM_ROOT", default="/var/lib/gpucloud"),
    "agent_python": env.str("SLURM_AGENT_PYTHON", default="/usr/bin/python3"),
    # Empty: a copy of this checkout's agent under the root (tools/), readable by every job's account however
    # private the checkout is; set it to an agent file the nodes already have to use that one instead.
    "agent_path": env.str("SLURM_AGENT_PATH", default=""),
    "console_url": env.str("SLURM_CONSOLE_URL", default=SITE_URL),
    "heartbeat_seconds": env.float("SLURM_HEARTBEAT_SECONDS", default=15),
    "job_prefix": env.str("SLURM_JOB_PREFIX", default="inst-"),
    # What runs JupyterLab in each job, at a path every node sees: a Python with JupyterLab (or its `jupyter`).
    # Empty: the local backend's runtime (LOCAL_RUNTIME_DIR) once it is built here; "off": no JupyterLab.
    "jupyter_python": env.str("SLURM_JUPYTER_PYTHON", default=""),
    # Where the nodes see the image store (IMAGE_IMPORT_ROOT): machines booted from an imported image bind its root
    # file system from there. Empty: the same path as on the console's host (the local cluster's node is that host).
    "image_root": env.str("SLURM_IMAGE_ROOT", default=""),
}
# The local backend (`instances/backends/local.py`): instances as bubblewrap sandboxes on this host, the default
# of `make run` where the host allows it (root, bwrap). Each sandbox's home, sockets and mount hub live under
# LOCAL_SANDBOX_ROOT; data disks under its disks/, users' cloud storage under shared/, hub items under
# LOCAL_HUB_ROOT. Sandbox users are host uids LOCAL_SANDBOX_UID_BASE + the owner's id. The runtime (JupyterLab,
# numpy) is built once into LOCAL_RUNTIME_DIR from the host's system Python.
LOCAL_SANDBOX_ROOT = Path(env.str("LOCAL_SANDBOX_ROOT", default=str(DATA_DIR / "sandboxes")))
LOCAL_HUB_ROOT = Path(env.str("LOCAL_HUB_ROOT", default=str(LOCAL_SANDBOX_ROOT / "hub")))
LOCAL_RUNTIME_DIR = Path(
    env.str(
        "LOCAL_RUNTIME_DIR",
        default="/opt/gpucloud/runtime" if os.geteuid() == 0 else str(Path.home() / ".cache/gpucloud/runtime"),
    )
)
LOCAL_RUNTIME_PYTHON = env.str("LOCAL_RUNTIME_PYTHON", default="")
LOCAL_SANDBOX_UID_BASE = env.int("LOCAL_SANDBOX_UID_BASE", default=1_000_000_000)  # above /etc/subuid ranges
# A console's sandbox uids are [base, base + LOCAL_SANDBOX_UID_RANGE); it claims the range in a file under
# LOCAL_SANDBOX_UID_REGISTRY before it starts a machine, and refuses while another console's claim overlaps it.
LOCAL_SANDBOX_UID_RANGE = env.int("LOCAL_SANDBOX_UID_RANGE", default=100_000_000)
LOCAL_SANDBOX_UID_REGISTRY = Path(env.str("LOCAL_SANDBOX_UID_REGISTRY", default="/run/gpucloud-sandbox-uids"))
# Sizes (MiB) of each machine's in-memory file systems: its sockets folder (/run/gpucloud), /tmp, /var, /dev/shm.
LOCAL_RUN_MB = env.int("LOCAL_RUN_MB", default=16)
LOCAL_TMP_MB = env.int("LOCAL_TMP_MB", default=512)
LOCAL_VAR_MB = env.int("LOCAL_VAR_MB", default=64)
LOCAL_SHM_MB = env.int("LOCAL_SHM_MB", default=64)
# Where the host's lxcfs serves each machine's own /proc figures (memory limit, CPUs, uptime): instances.backends.
# local_lxcfs starts it there when it is not running.
# Where `make docs` builds the documentation site, which the console serves at /docs/.
DOCS_SITE_DIR = env.str("DOCS_SITE_DIR", default=str(BASE_DIR / "build" / "docs-site"))
LOCAL_LXCFS_DIR = env.str("LOCAL_LXCFS_DIR", default="/var/lib/gpucloud/lxcfs")
# Operator mirrors written into local machines that have a network (a zone with egress): pip's index (the
# machine's /etc/pip.conf) and the model hub (HF_ENDPOINT; empty: the console's own hub, through the agent's relay).
MIRROR_PIP_INDEX = env.str("MIRROR_PIP_INDEX", default="")
MIRROR_HF_ENDPOINT = env.str("MIRROR_HF_ENDPOINT", default="")
LOCAL_MEMORY_MB = env.int("LOCAL_MEMORY_MB", default=2048)
LOCAL_PIDS = env.int("LOCAL_PIDS", default=512)
LOCAL_CPUS = env.float("LOCAL_CPUS", default=1.0)
# What the local backend's machines may hold together: each reserves its cgroup limits (LOCAL_CPUS,
# LOCAL_MEMORY_MB) at launch from the host's CPUs (nproc) and memory (MemTotal), less what the console keeps for
# itself (PostgreSQL, Redis, web and worker); a launch past that is refused. LOCAL_HOST_CPUS / LOCAL_HOST_MEMORY_MB
# replace the measured figures (0: measured).
LOCAL_HOST_CPUS = env.float("LOCAL_HOST_CPUS", default=0.0)
LOCAL_HOST_MEMORY_MB = env.int("LOCAL_HOST_MEMORY_MB", default=0)
LOCAL_CONSOLE_CPUS = env.float("LOCAL_CONSOLE_CPUS", default=0.0)
LOCAL_CONSOLE_MEMORY_MB = env.int("LOCAL_CONSOLE_MEMORY_MB", default=2048)
# Each home (the system disk) is an ext4 image of the instance's system disk size, loop-mounted: "auto" where this
# host has loop devices and mkfs.ext4 (else a plain folder without a size limit, and the instance page says so),
# "on" to refuse to start a machine without the limit, "off" for plain folders.
LOCAL_HOME_QUOTA = env.str("LOCAL_HOME_QUOTA", default="auto").lower()
# Disk space the local backend's images (homes, data disks, cloud storage) never promise away: each sparse image's
# room to grow counts against the host's free space less this.
LOCAL_HOST_RESERVE_GB = env.float("LOCAL_HOST_RESERVE_GB", default=10)
if LOCAL_HOME_QUOTA not in ("auto", "on", "off"):
    raise ImproperlyConfigured(f"LOCAL_HOME_QUOTA must be 'auto', 'on' or 'off', not {LOCAL_HOME_QUOTA!r}.")
# The agent reports to the web server on this host directly (make run's HOST and PORT), not through the public URL.
_web_host = env.str("HOST", default="127.0.0.1").replace("0.0.0.0", "127.0.0.1")
LOCAL_AGENT_CONSOLE_URL = env.str(
    "LOCAL_AGENT_CONSOLE_URL", default=f"http://{_web_host}:{env.int('PORT', default=8000)}"
)
LOCAL_HEARTBEAT_SECONDS = env.float("LOCAL_HEARTBEAT_SECONDS", default=15)

# Machines one account (a person or a team's account) may hold at once (creating, starting, running or stopping),
# and how many of them CPU-only: the defaults of the back office's account limits (instances.AccountLimit), where
# the operator changes them for everyone or raises them for one account. LIMITS_CONTACT (an address or a URL) is
# where a refusal tells users to ask for more; empty: "ask the operator".
ACCOUNT_MAX_MACHINES = env.int("ACCOUNT_MAX_MACHINES", default=10)
ACCOUNT_MAX_CPU_ONLY = env.int("ACCOUNT_MAX_CPU_ONLY", default=3)
LIMITS_CONTACT = env.str("LIMITS_CONTACT", default="")

SLURM_ZONES = {
    "cn-east-xc": {"partition": "xinchuang"},
    "cn-east-a": {"partition": "nvidia"},
}

# The SSH gateway (`manage.py ssh_gateway`): ssh, scp and SFTP into running instances, logged in with the owner's
# SSH keys. It listens on SSH_GATEWAY_HOST:SSH_GATEWAY_PORT; instance pages tell users to connect to
# SSH_GATEWAY_PUBLIC_HOST (by default the host name the page was asked for). Its host key is made once, in DATA_DIR.
SSH_GATEWAY_HOST = env.str("SSH_GATEWAY_HOST", default="127.0.0.1")
SSH_GATEWAY_PORT = env.int("SSH_GATEWAY_PORT", default=2222)
SSH_GATEWAY_PUBLIC_HOST = env.str("SSH_GATEWAY_PUBLIC_HOST", default="")
# OpenSSH's SFTP server, run inside the machine for SFTP and scp (Debian: openssh-sftp-server).
SSH_SFTP_SERVER = env.str("SSH_SFTP_SERVER", default="/usr/lib/openssh/sftp-server")

# The share of the compute that other users spend on a community image that is paid to its author (SPEC §7).
# A decimal string: money is never a float.
IMAGE_AUTHOR_SHARE = env.str("IMAGE_AUTHOR_SHARE", default="0.03")
