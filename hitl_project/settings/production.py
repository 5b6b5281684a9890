"""Production settings: secrets must come from the environment; HTTPS everywhere."""

from django.core.exceptions import ImproperlyConfigured

from hitl_project.settings.base import *  # noqa: F403
from hitl_project.settings.base import env

DEBUG = False
SECRET_KEY = env.str("SECRET_KEY")
if SECRET_KEY.startswith("dev-insecure"):
    raise ImproperlyConfigured("SECRET_KEY must be set in production")
HITL_AUDIT_KEY = env.str("HITL_AUDIT_KEY")
HITL_SECRETS_KEY = env.str("HITL_SECRETS_KEY")
# Declared http calls may not reach loopback, link-local or private addresses unless allow-listed
# (HITL_HTTP_ALLOW_PRIVATE); HITL_HTTP_DENY_PRIVATE=false turns that off.
HITL_HTTP_DENY_PRIVATE = env.bool("HITL_HTTP_DENY_PRIVATE", default=True)
HITL_STRICT_CONFIG = True  # a key that cannot work refuses to start (approvals/checks.py, toolgate/checks.py)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
