from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _ensure_schedules(sender, using="default", **kwargs) -> None:
    from approvals.recovery import ensure_maintenance_schedules
    from approvals.timers import ensure_timer_schedules

    ensure_timer_schedules()
    ensure_maintenance_schedules()


def _on_worker_start(sender, proc_name="", **kwargs) -> None:
    """A q-cluster worker (re)started, on either cluster: run crash recovery and make sure a timer
    drainer is running, both queued for the timer cluster."""
    from django.conf import settings
    from django_q.tasks import async_task

    from approvals.timers import DRAIN_FUNC

    cluster = settings.HITL_TIMER_CLUSTER
    async_task(
        "approvals.recovery.run_recovery", task_name="hitl-recovery-at-start", group="hitl", cluster=cluster
    )
    async_task(DRAIN_FUNC, task_name="hitl-timer-drain", group="hitl", cluster=cluster)


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        from django_q.signals import post_spawn

        from approvals import checks  # noqa: F401  (registers the system checks of HITL_AUDIT_KEY)
        from approvals.notices import queue_due_notices
        from approvals.recovery import recover_expired_leases
        from approvals.timers import sweep_while_draining

        sweep_while_draining(recover_expired_leases)
        sweep_while_draining(queue_due_notices)

        post_migrate.connect(_ensure_schedules, sender=self)
        post_spawn.connect(_on_worker_start, dispatch_uid="hitl-worker-start")
