"""The schedule store: django-q2's schedules over REST and in the admin, with HITL's own protected."""
