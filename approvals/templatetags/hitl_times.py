"""``{% hitl_time value %}`` and ``{% hitl_time value deadline=True %}``: approvals.admin.times in templates."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils.safestring import SafeString

from approvals.admin.times import time_html

register = template.Library()


@register.simple_tag
def hitl_time(value: datetime | None, deadline: bool = False, empty: str = "-") -> SafeString:
    return time_html(value, deadline=deadline, empty=empty)
