"""Admin pages of the approvals app (Django autodiscovers this package)."""

import approvals.admin.audit  # the read-only audit ledger: filters, chain verification, export
import approvals.admin.history  # the "Decided approvals" history: recent decisions, one subject's pauses
import approvals.admin.inbox  # noqa: F401  (the "Pending approvals" inbox, decision page and bulk decisions)
