import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_project.settings.base")
application = get_asgi_application()

from hitl_project.startup_checks import refuse_to_start_on_key_errors  # noqa: E402  (needs Django set up)

refuse_to_start_on_key_errors()
