from django.apps import AppConfig


class ApprovalRequestsConfig(AppConfig):
    name = "approval_requests"
    verbose_name = "Approval requests"

    def ready(self) -> None:
        # local import: registration at startup (the engine handler, the admin decision page part; the
        # check of the grant signing key)
        from approval_requests import admin_pages, checks, engine_handler, webhooks  # noqa: F401
        from approvals.notices import register_notice_listener

        engine_handler.register()
        admin_pages.register()
        register_notice_listener(webhooks.on_notice)
