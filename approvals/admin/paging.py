"""The inbox's page count, capped: the paginator counts at most COUNT_CAP + 1 matching pauses.

Django's paginator runs ``COUNT(*)`` over everything a filter matches; at 100,000 pending pauses that is
a scan of the whole filtered set on every page load (26 ms, the filtered page's largest cost), to print
a number nobody pages through. Counting ``SELECT id … LIMIT COUNT_CAP + 1`` stops early; the list then
says "more than 10,000" and pages through the first COUNT_CAP (200 pages of 50): a filter or a search
finds the rest.
"""

from __future__ import annotations

from django.core.paginator import Paginator
from django.utils.functional import cached_property

COUNT_CAP = 10_000


class CappedCountPaginator(Paginator):
    cap = COUNT_CAP  # the pagination template says "more than 10,000" past it

    @property
    def cap_label(self) -> str:
        return f"{self.cap:,}"

    capped = False  # set when more rows match than are counted

    @cached_property
    def count(self) -> int:
        """The number of matching rows, at most ``cap`` (``capped`` says there are more)."""
        # only the ids: the rows' annotations (the agent's name, a subquery per row) are not computed to be counted
        counted = self.object_list.order_by().values("pk")[: self.cap + 1].count()
        self.capped = counted > self.cap
        return min(counted, self.cap)
