from django.apps import AppConfig


class SlackSurfaceConfig(AppConfig):
    name = "slack_surface"
    verbose_name = "Slack"

    def ready(self) -> None:
        from approvals.settlements import register_settlement_listener
        from slack_surface.pushes import on_pause_settled  # local import: registration at startup

        register_settlement_listener(on_pause_settled)
