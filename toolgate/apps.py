from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _ensure_journal_schedule(sender, **kwargs) -> None:
    from django.conf import settings
    from django_q.models import Schedule

    Schedule.objects.update_or_create(
        name="hitl-journal-retention",
        defaults={
            "func": "toolgate.gate.journal.purge_expired",
            "schedule_type": Schedule.DAILY,
            "repeats": -1,
            "cluster": settings.HITL_TIMER_CLUSTER,
        },
    )


class ToolgateConfig(AppConfig):
    name = "toolgate"
    verbose_name = "Tool gating"

    def ready(self) -> None:
        from approvals.models import PauseKind
        from approvals.pause_kinds import (
            register_call_outcomes,
            register_decision_validator,
            register_details_provider,
            register_outcome_unknown_reader,
        )
        from toolgate import checks  # noqa: F401  (registers the checks of the secret store and pinning keys)
        from toolgate.gate.call_outcomes import call_outcomes
        from toolgate.gate.decision_validation import validate_tool_decision
        from toolgate.gate.pause_details import tool_pause_details
        from toolgate.outbound import log_redaction
        from toolgate.runtime.step_journal import outcome_unknown_steps

        register_decision_validator(PauseKind.TOOL_CALL, validate_tool_decision)
        register_details_provider(PauseKind.TOOL_CALL, tool_pause_details)
        register_call_outcomes(PauseKind.TOOL_CALL, call_outcomes)
        register_outcome_unknown_reader(outcome_unknown_steps)
        post_migrate.connect(_ensure_journal_schedule, sender=self)
        log_redaction.install()
