from django.apps import AppConfig


class GroupsConfig(AppConfig):
    name = "groups"
    verbose_name = "Group discussions"

    def ready(self) -> None:
        from groups import (  # local import: registration at startup
            admin_pages,
            discussion_decisions,
            surface_handler,
        )

        surface_handler.register()
        discussion_decisions.register()
        admin_pages.register()
