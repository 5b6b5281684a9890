"""Admin pages of the approvals app (Django autodiscovers this module)."""

import approvals.admin_schedules  # noqa: F401  (replaces django-q2's admins with protected ones)
