from django.apps import AppConfig


class ApprovalRequestsConfig(AppConfig):
    name = "approval_requests"
    verbose_name = "Approval requests"

    def ready(self) -> None:
        from approval_requests import admin_pages, engine_handler  # local import: registration at startup

        engine_handler.register()
        admin_pages.register()
