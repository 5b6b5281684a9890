from django.apps import AppConfig


class ApprovalRequestsConfig(AppConfig):
    name = "approval_requests"
    verbose_name = "Approval requests"

    def ready(self) -> None:
        # local import: registration at startup (the engine handler; the check of the grant signing key)
        from approval_requests import checks, engine_handler  # noqa: F401

        engine_handler.register()
