from django.apps import AppConfig


class SlackSurfaceConfig(AppConfig):
    name = "slack_surface"
    verbose_name = "Slack"

    def ready(self) -> None:
        # local import: listeners register at startup, once the apps' models are loaded
        from approvals.notices import register_notice_listener
        from approvals.openings import register_opening_listener
        from approvals.settlements import register_settlement_listener
        from groups.events import register_observer
        from slack_surface import discussion_notices, notices, pushes, request_cards

        register_settlement_listener(pushes.on_pause_settled, probe=pushes.thread_probe())
        register_settlement_listener(discussion_notices.on_pause_settled)
        register_settlement_listener(request_cards.on_pause_settled)
        register_opening_listener(discussion_notices.on_pause_opened)
        register_opening_listener(request_cards.on_pause_opened)
        register_observer(discussion_notices.observe)
        register_notice_listener(notices.on_notice)
