from django.apps import AppConfig


class GroupsConfig(AppConfig):
    name = "groups"
    verbose_name = "Group discussions"

    def ready(self) -> None:
        from groups import discussion_decisions, surface_handler  # local import: registration at startup

        surface_handler.register()
        discussion_decisions.register()
