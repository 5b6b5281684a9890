from django.apps import AppConfig


class ToolgateConfig(AppConfig):
    name = "toolgate"
    verbose_name = "Tool gating"
