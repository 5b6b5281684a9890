from django.apps import AppConfig


class GroupsConfig(AppConfig):
    name = "groups"
    verbose_name = "Group discussions"

    def ready(self) -> None:
        from groups import (  # local import: registration at startup
            admin_pages,
            discussion_decisions,
            engine_handler,
        )

        engine_handler.register()
        discussion_decisions.register()
        admin_pages.register()
