"""Django admin with HITL's own site (hitl_project.admin_site): INSTALLED_APPS names this config.

Kept apart from the site module so that loading the app registry imports no models.
"""

from django.contrib.admin.apps import AdminConfig


class HitlAdminConfig(AdminConfig):
    default_site = "hitl_project.admin_site.ReviewerAdminSite"
