"""The inbox's page count, capped: the paginator counts at most COUNT_CAP + 1 matching pauses.

Django's paginator runs ``COUNT(*)`` over everything a filter matches; at 100,000 pending pauses that is
a scan of the whole filtered set on every page load (26 ms, the filtered page's largest cost), to print
a number nobody pages through. Counting ``SELECT 1 … LIMIT COUNT_CAP + 1`` stops early; the list then
says "more than 10,000" and offers the first COUNT_CAP / 50 pages: a filter or a search finds the rest.
"""

from __future__ import annotations

from django.core.paginator import Paginator
from django.utils.functional import cached_property

COUNT_CAP = 10_000


class CappedCountPaginator(Paginator):
    cap = COUNT_CAP  # the pagination template says "more than 10,000" past it
    cap_label = f"{COUNT_CAP:,}"

    @cached_property
    def count(self) -> int:
        """The number of matching rows, or COUNT_CAP + 1 when there are more than COUNT_CAP."""
        return self.object_list.order_by()[: COUNT_CAP + 1].count()
