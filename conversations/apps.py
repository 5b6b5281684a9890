from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"
    verbose_name = "Conversations"

    def ready(self) -> None:
        from conversations import agent_directory, engine_handler
        from conversations.pipeline.builtin_tasks import register_builtin_tasks

        engine_handler.register()
        agent_directory.register()
        register_builtin_tasks()
