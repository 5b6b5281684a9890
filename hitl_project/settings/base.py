"""Settings for every environment, driven by environment variables (names in docs/operations.md)."""

from pathlib import Path

import environ

from common.throttle_rates import throttle_rate
from hitl_project.metrics_setup import configure_multiprocess_dir
from hitl_project.settings.database import database_settings

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

# prometheus_client's multiprocess mode needs its directory in the environment before anything
# imports it (django-q2 does, during django.setup()): web workers and q-cluster processes share it.
PROMETHEUS_MULTIPROC_DIR = configure_multiprocess_dir(BASE_DIR)
HITL_METRICS_PUBLIC = env.bool("HITL_METRICS_PUBLIC", default=True)

SECRET_KEY = env.str("SECRET_KEY", default="dev-insecure-secret-key-change-me-0123456789abcdef")
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])

INSTALLED_APPS = [
    "hitl_project.admin_apps.HitlAdminConfig",  # django.contrib.admin with our site
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",  # OpClass in index expressions (the inbox search's trigram index)
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_q",
    "approvals",
    "schedules",
    "toolgate",
    "conversations",
    "groups",
    "approval_requests",
    "slack_surface",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "hitl_project.request_metrics.RequestMetricsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "hitl_project.admin_messages.AdminMessageMiddleware",  # the messages, for the admin only
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "hitl_project.urls"
ASGI_APPLICATION = "hitl_project.asgi.application"
WSGI_APPLICATION = "hitl_project.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": database_settings(env, BASE_DIR)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "var" / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # collectstatic fills it; WhiteNoise warns when it is missing
# Static files (admin, Swagger UI from the sidecar) are served by WhiteNoise, under uvicorn too.
WHITENOISE_USE_FINDERS = env.bool("WHITENOISE_USE_FINDERS", default=True)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "approvals.authentication.TokenWithRolesAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["approvals.api.permissions.SignedInPerson"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # DRF's negotiation, with the answer for no Accept, */* and application/json worked out once
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "common.negotiation.JsonFirstNegotiation",
    "DEFAULT_PARSER_CLASSES": ["common.parsers.CheckedJSONParser"],
    "EXCEPTION_HANDLER": "common.problems.problem_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # every unsafe request of a signed-in user counts against the "writes" rate; the views that run a
    # turn count against "turns" instead (common.throttles)
    "DEFAULT_THROTTLE_CLASSES": ["common.throttles.WriteRateThrottle"],
}

SPECTACULAR_SETTINGS = {
    "TITLE": "HITL approval service",
    "DESCRIPTION": "Human approval gates for AI-agent conversations.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # two "state" choice sets: each enum gets its own name in the schema
    # the error responses and closed request bodies (hitl_project/schema_errors.py), after the default enum hook
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "hitl_project.schema_errors.add_error_responses",
    ],
    "ENUM_NAME_OVERRIDES": {
        "ConversationStateEnum": "conversations.models.ConversationState",
        "DiscussionStateEnum": "groups.models.DiscussionState",
        "ApprovalRequestStatusEnum": "approval_requests.models.RequestStatus",
        "DecisionVerdictEnum": ["APPROVED", "REJECTED"],
        "OutcomeStatusEnum": ["succeeded", "failed"],
    },
}

# Two django-q2 clusters on one ORM broker (docs/operations.md): the default one ("hitl") runs
# continuations and other work; timers, crash recovery and maintenance run on HITL_TIMER_CLUSTER
# (`Q_CLUSTER_NAME=hitl-timers manage.py qcluster`), so a backlog of work never delays a deadline.
HITL_TIMER_CLUSTER = "hitl-timers"
Q_CLUSTER = {
    "name": "hitl",
    "orm": "default",
    "workers": env.int("HITL_Q_WORKERS", default=2),
    "timeout": env.int("HITL_Q_TIMEOUT", default=300),
    "retry": env.int("HITL_Q_RETRY", default=360),
    "max_attempts": 3,
    "catch_up": False,
    # -1: successful tasks are not saved. Nothing reads them (a decision's outcome is on the Pause
    # and in the audit), and with a positive limit the monitor locks and loads that many rows after
    # every task. Failures are always saved. The live tests set 0 (keep all, no pruning) to observe
    # which worker ran what.
    "save_limit": env.int("HITL_Q_SAVE_LIMIT", default=-1),
    "ack_failures": True,
    "poll": 0.2,
    "sync": env.bool("HITL_Q_SYNC", default=False),
    # What differs for the cluster started with Q_CLUSTER_NAME=<key> (django-q2 requires the key).
    "ALT_CLUSTERS": {HITL_TIMER_CLUSTER: {"workers": env.int("HITL_TIMER_Q_WORKERS", default=2)}},
}

# HITL settings (names in docs/operations.md)
HITL_ADMIN_GROUP = env.str("HITL_ADMIN_GROUP", default="hitl-admin")
HITL_APPROVER_GROUP = env.str("HITL_APPROVER_GROUP", default="hitl-approver")
# Service accounts (role agent): agents running elsewhere that file approval requests and never decide.
HITL_AGENT_GROUP = env.str("HITL_AGENT_GROUP", default="hitl-agent")
# hitlConfig.allowSelfApproval of an agent that does not state it (approvals.self_approval).
HITL_ALLOW_SELF_APPROVAL = env.bool("HITL_ALLOW_SELF_APPROVAL", default=True)
HITL_TOOL_ENABLED = env.bool("HITL_TOOL_ENABLED", default=True)
HITL_TASK_APPROVALS_MODE = env.str("HITL_TASK_APPROVALS_MODE", default="strict")
HITL_CRASH_RECOVERY_ENABLED = env.bool("HITL_CRASH_RECOVERY_ENABLED", default=True)
HITL_RECOVER_IN_PROGRESS = env.bool("HITL_RECOVER_IN_PROGRESS", default=True)
HITL_PENDING_MAX_AGE = env.str("HITL_PENDING_MAX_AGE", default="")
HITL_PENDING_SWEEP_INTERVAL = env.str("HITL_PENDING_SWEEP_INTERVAL", default="PT6H")
HITL_TIMEOUT_BATCH_SIZE = env.int("HITL_TIMEOUT_BATCH_SIZE", default=100)
HITL_AUDIT_KEY = env.str("HITL_AUDIT_KEY", default=SECRET_KEY)
HITL_TRANSCRIPT_MAX_BYTES = env.int("HITL_TRANSCRIPT_MAX_BYTES", default=2_000_000)
# A turn loads the newest HITL_MEMORY_WINDOW_STEPS steps of its conversation (default: an llm task's
# default conversationHistoryLimit); older ones are read only when a task asks for them. A snapshot
# (the answer of start, say, resume ...) shows the newest HITL_SNAPSHOT_STEPS steps and "stepCount".
HITL_MEMORY_WINDOW_STEPS = env.int("HITL_MEMORY_WINDOW_STEPS", default=10)
HITL_SNAPSHOT_STEPS = env.int("HITL_SNAPSHOT_STEPS", default=50)
HITL_JOURNAL_RETENTION = env.str("HITL_JOURNAL_RETENTION", default="P30D")
# Outbound HTTP of declared calls (toolgate/outbound/egress.py, docs/operations.md "Outbound HTTP (egress)"): refuse
# non-public addresses. Off here because development and the tests call servers on loopback; on by default
# under the production settings. The allow-list: comma-separated host names and networks an operator trusts.
HITL_HTTP_DENY_PRIVATE = env.bool("HITL_HTTP_DENY_PRIVATE", default=False)
HITL_HTTP_ALLOW_PRIVATE = env.str("HITL_HTTP_ALLOW_PRIVATE", default="")
HITL_HTTP_TIMEOUT_SECONDS = env.float("HITL_HTTP_TIMEOUT_SECONDS", default=10.0)
# The process that makes a decision runs its continuation (resume?wait, the admin page); off: every
# continuation is handed to the q-cluster (a q-cluster-only deployment, the web runs none).
HITL_CONTINUE_INLINE = env.bool("HITL_CONTINUE_INLINE", default=True)
# How long an approved approval request may be claimed (ISO-8601 duration); after it, a claim is refused.
HITL_GRANT_TTL = env.str("HITL_GRANT_TTL", default="PT15M")
# The Ed25519 key that signs execution grant tokens (approval_requests/grants.py): the base64 of a random
# 32-byte seed; empty derives one from SECRET_KEY. Its public key is served at /.well-known/hitl-grant-keys.
HITL_GRANT_SIGNING_KEY = env.str("HITL_GRANT_SIGNING_KEY", default="")
# The MCP surface at /mcp (docs/mcp.md): false makes every tool that changes something (the decisions and
# cancels of conversations, group discussions and approval requests, the talk tools) answer DISABLED,
# checked first, while its read tools keep working.
HITL_MCP_MUTATIONS_ENABLED = env.bool("HITL_MCP_MUTATIONS_ENABLED", default=True)
# resume without ?wait: the web process runs a quick continuation (local tasks only) once its answer is
# sent (true), or hands every one to the q-cluster (false). Chosen by measurement: docs/performance.md.
HITL_CONTINUE_AFTER_RESPONSE = env.bool("HITL_CONTINUE_AFTER_RESPONSE", default=True)
# Leases of running continuations and turns (approvals.leases): short, renewed by a heartbeat while the
# work runs; crash recovery sweeps expired ones every HITL_LEASE_SWEEP_SECONDS.
HITL_CONTINUATION_LEASE_SECONDS = env.int("HITL_CONTINUATION_LEASE_SECONDS", default=15)
HITL_LEASE_RENEW_SECONDS = env.float("HITL_LEASE_RENEW_SECONDS", default=5.0)
HITL_LEASE_SWEEP_SECONDS = env.float("HITL_LEASE_SWEEP_SECONDS", default=5.0)
# The SSE streams of group discussions send a ": keep-alive" comment after this many idle seconds, so a
# proxy or client does not time a stream out during a slow member turn (groups/sse.py).
HITL_SSE_KEEPALIVE_SECONDS = env.float("HITL_SSE_KEEPALIVE_SECONDS", default=15.0)
# Threads per ASGI server process that serve the REST API through Django's WSGI handler
# (hitl_project/serving.py); each holds a database connection while it serves a request.
HITL_WSGI_THREADS = env.int("HITL_WSGI_THREADS", default=8)

# No secret in any log line (toolgate.outbound.log_redaction): every record is redacted as it is created, the
# console handler filters again, and httpx/httpcore, which log each request's full URL, stay at WARNING.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "redact_secrets": {"()": "toolgate.outbound.log_redaction.RedactingFilter"},
        "one_line_client_errors": {"()": "hitl_project.request_logging.OneLineClientErrors"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["redact_secrets"]}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        # an expected 403 (a view's PermissionDenied) is one line, not a traceback
        "django.request": {"filters": ["one_line_client_errors"]},
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
    },
}
# The timer drainer: how long one drainer task runs before handing over, and whether it re-enqueues
# itself (the periodic "hitl-timer-drain" schedule restarts it within a minute either way).
HITL_TIMER_DRAIN_SECONDS = env.float("HITL_TIMER_DRAIN_SECONDS", default=25.0)
HITL_TIMER_DRAIN_CHAIN = env.bool("HITL_TIMER_DRAIN_CHAIN", default=True)
# A pause's django-q2 one-shot schedule is a backstop this long after the deadline the drainer keeps.
HITL_TIMER_BACKSTOP_SECONDS = env.int("HITL_TIMER_BACKSTOP_SECONDS", default=120)
# Crash recovery: how often it runs, and when a decided pause whose continuation no worker picked up,
# or a turn left IN_PROGRESS without a pause, counts as abandoned.
HITL_RECOVERY_INTERVAL_SECONDS = env.int("HITL_RECOVERY_INTERVAL_SECONDS", default=300)
HITL_CONTINUATION_START_TIMEOUT_SECONDS = env.int("HITL_CONTINUATION_START_TIMEOUT_SECONDS", default=1800)
HITL_STALE_TURN_SECONDS = env.int("HITL_STALE_TURN_SECONDS", default=600)
# Functions a schedule created through /schedulestore/schedules or the admin may run: an allow-list,
# because a dotted path to any function would be remote code execution.
HITL_SCHEDULABLE_FUNCTIONS = env.list(
    "HITL_SCHEDULABLE_FUNCTIONS",
    default=["approvals.maintenance_tasks.noop", "approvals.maintenance_tasks.clear_expired_sessions"],
)
# How long one call of an OpenAI-compatible model may take.
HITL_LLM_TIMEOUT_SECONDS = env.float("HITL_LLM_TIMEOUT_SECONDS", default=60.0)
# Fernet keys of the secret store behind ${vault:NAME}, comma-separated, newest first (rotation:
# put a new key first, run manage.py hitl_rotate_secrets, then drop the old one).
HITL_SECRETS_KEY = env.str("HITL_SECRETS_KEY", default="")
# Slack (docs/slack.md): the Web API base URL slack_sdk's WebClient calls (tests point it at a local
# fake), and how often a continuation notice whose post failed is tried again in all.
HITL_SLACK_API_URL = env.str("HITL_SLACK_API_URL", default="https://slack.com/api/")
HITL_SLACK_DELIVERY_ATTEMPTS = env.int("HITL_SLACK_DELIVERY_ATTEMPTS", default=5)
# The Slack integration whose approval channel gets the cards of approval requests (slack_surface.request_cards);
# empty: the first integration, by name, that has an approval channel.
HITL_SLACK_APPROVAL_REQUESTS_INTEGRATION = env.str("HITL_SLACK_APPROVAL_REQUESTS_INTEGRATION", default="")
# Email about pauses (approvals.notices, docs/approvals-routing.md): Django's email framework, configured
# by EMAIL_URL (django-environ: consolemail:// prints them, smtp+tls://user:password@host:587 sends them);
# HITL_PUBLIC_URL is where the messages' links point (the admin decision page, sign-in required).
HITL_EMAIL_NOTIFICATIONS = env.bool("HITL_EMAIL_NOTIFICATIONS", default=True)
HITL_PUBLIC_URL = env.str("HITL_PUBLIC_URL", default="http://127.0.0.1:8000")
_EMAIL = env.email_url("EMAIL_URL", default="consolemail://")
# another backend by its dotted path, e.g. django-anymail's "anymail.backends.postmark.EmailBackend"
# (installed beside the service), with its ANYMAIL settings as JSON: {"POSTMARK_SERVER_TOKEN": "…"}
EMAIL_BACKEND = env.str("EMAIL_BACKEND", default=_EMAIL["EMAIL_BACKEND"])
ANYMAIL = env.json("ANYMAIL", default={})
EMAIL_HOST = _EMAIL.get("EMAIL_HOST") or "localhost"
EMAIL_PORT = _EMAIL.get("EMAIL_PORT") or 25
EMAIL_HOST_USER = _EMAIL.get("EMAIL_HOST_USER") or ""
EMAIL_HOST_PASSWORD = _EMAIL.get("EMAIL_HOST_PASSWORD") or ""
EMAIL_USE_TLS = bool(_EMAIL.get("EMAIL_USE_TLS"))
EMAIL_USE_SSL = bool(_EMAIL.get("EMAIL_USE_SSL"))
EMAIL_TIMEOUT = env.int("EMAIL_TIMEOUT", default=10)
if _EMAIL.get("EMAIL_FILE_PATH"):  # filemail:///path: each message written to a file there
    EMAIL_FILE_PATH = "/" + _EMAIL["EMAIL_FILE_PATH"].lstrip("/")  # django-environ drops the root's slash
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="HITL approvals <hitl@localhost>")
# Key of the request-pinning HMAC (derived from SECRET_KEY when empty).
HITL_PINNING_KEY = env.str("HITL_PINNING_KEY", default="")
# Throttles and caps (docs/operations.md, "Throttles and caps"): one signed-in user cannot flood the
# service nor bury other people's requests. Request rates per user, "N/s", "N/min", "N/hour" or "N/day",
# read at request time (common.throttles); empty or "off" turns one off. "turns": requests that run
# an agent turn or start a group discussion; "writes": every other POST, PUT, PATCH and DELETE.
HITL_THROTTLE_TURNS_RATE = throttle_rate(
    env.str("HITL_THROTTLE_TURNS_RATE", default="60/min"), setting="HITL_THROTTLE_TURNS_RATE"
)
HITL_THROTTLE_WRITES_RATE = throttle_rate(
    env.str("HITL_THROTTLE_WRITES_RATE", default="600/min"), setting="HITL_THROTTLE_WRITES_RATE"
)
# Where the counts live: a cache every web process shares. The default is a table of this database
# (created by migrate); a cache URL such as redis://host:6379/1 moves them (django-environ's cache URLs).
HITL_THROTTLE_CACHE_URL = env.str(
    "HITL_THROTTLE_CACHE_URL", default="dbcache://hitl_throttle_cache?max_entries=10000"
)
# How long a web process may keep a token it verified (approvals.credential_cache): it is dropped at once
# when the token, its user or the user's groups change; this bounds it whatever else happens. 0: off.
HITL_CREDENTIAL_CACHE_SECONDS = env.int("HITL_CREDENTIAL_CACHE_SECONDS", default=60)
# Pending pauses a user may own (1:1 and groups) and an agent may have before a new turn is refused
# (approvals.pause_caps; 0: no cap), and the largest context a turn stores (canonical JSON, UTF-8; 0: no bound).
HITL_MAX_OPEN_PAUSES_PER_USER = env.int("HITL_MAX_OPEN_PAUSES_PER_USER", default=100)
HITL_MAX_OPEN_PAUSES_PER_AGENT = env.int("HITL_MAX_OPEN_PAUSES_PER_AGENT", default=1000)
HITL_CONTEXT_MAX_BYTES = env.int("HITL_CONTEXT_MAX_BYTES", default=65_536)
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "throttle": environ.Env.cache_url_config(HITL_THROTTLE_CACHE_URL),
}
# Whether a key that cannot work (or is too short) is an error that stops manage.py check, migrate and
# qcluster, or a warning: the production settings make it an error (approvals/checks.py).
HITL_STRICT_CONFIG = False
