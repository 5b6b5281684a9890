"""Approval requests: an action an agent running elsewhere asks a human to approve.

The third kind of subject of the HITL core, beside 1:1 conversations and group discussions. A service
account (role ``agent``) files a request, optionally with the exact HTTP request it will send (pinned);
a reviewer decides it on any surface through the core; the agent claims the approval once, executes
exactly what was approved, and reports the outcome. Webhooks tell the agent's service of each end.
"""
