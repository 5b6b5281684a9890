"""The inbox's "new work" poll: a small JSON answer the changelist's script asks for every 15 s.

Staff only (it is mounted through ``admin_site.admin_view``) and scoped like the list itself
(``approvals.selectors.pending_summary`` over ``reviewable_pauses``): a reviewer learns how many pauses
*they* may decide, never a count outside their scope. ``since`` is the time the list was rendered (the
page carries it), so "new" means paused after the reviewer last saw the list, by the server's clock.
"""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from approvals.access import may_use_inbox
from approvals.selectors import pending_summary

POLL_SECONDS = 15  # how often the list asks; a hidden tab asks again as soon as it is shown


def inbox_updates_view(request: HttpRequest) -> JsonResponse:
    if not may_use_inbox(request.user):
        return JsonResponse({"error": "This account has no reviewer access."}, status=403)
    try:
        since = parse_datetime(request.GET.get("since", ""))
    except ValueError:
        since = None
    if since is None or timezone.is_naive(since):
        return JsonResponse(
            {"error": "'since' must be the time the list was shown, with its time zone (ISO 8601)."},
            status=400,
        )
    summary = pending_summary(user=request.user, since=since)
    newest = summary["newest"]
    return JsonResponse(
        {
            "pending": summary["pending"],
            "new": summary["new"],
            "newest": newest.isoformat() if newest else None,
            # what changes whenever the reviewer's list gains or loses a pause
            "marker": f"{summary['pending']}:{newest.isoformat() if newest else '-'}",
        }
    )
