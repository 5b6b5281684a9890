import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl_project.settings.base")
django_application = get_asgi_application()

from hitl_project.serving import rest_through_wsgi  # noqa: E402  (needs Django set up)
from hitl_project.startup_checks import refuse_to_start_on_key_errors  # noqa: E402  (needs Django set up)
from hitl_project.warm_start import load_then_freeze  # noqa: E402  (needs Django set up)
from mcp_surface.asgi import with_mcp  # noqa: E402  (its tools import models: needs Django set up)

refuse_to_start_on_key_errors()
# /mcp beside Django (docs/mcp.md); the REST API through Django's WSGI handler, the event streams through
# its ASGI handler (hitl_project/serving.py). hitl_project.wsgi serves Django alone, without /mcp.
application = with_mcp(rest_through_wsgi(django_application))
load_then_freeze()
