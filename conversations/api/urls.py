from django.urls import path

from conversations.api import agent_views as a
from conversations.api import conversation_views as c
from conversations.api import managed_views as m

urlpatterns = [
    path("agentstore/agents", a.AgentListView.as_view(), name="agents"),
    path("agentstore/agents/<str:agent_id>", a.AgentDetailView.as_view(), name="agent"),
    path("administration/<str:environment>/deploy/<str:agent_id>", a.DeployView.as_view(), name="deploy"),
    path(
        "administration/<str:environment>/undeploy/<str:agent_id>", a.UndeployView.as_view(), name="undeploy"
    ),
    path(
        "administration/<str:environment>/deploymentstatus/<str:agent_id>",
        a.DeploymentStatusView.as_view(),
        name="deployment-status",
    ),
    path("backup/import", a.ImportView.as_view(), name="backup-import"),
    path("backup/export/<str:agent_id>", a.ExportView.as_view(), name="backup-export"),
    path("AgentTriggerStore/agenttriggers", m.TriggerListView.as_view(), name="agent-triggers"),
    path("AgentTriggerStore/agenttriggers/<str:intent>", m.TriggerDetailView.as_view(), name="agent-trigger"),
    # before agents/<str:conversation_id>/...: "managed" is no conversation id
    path("agents/managed/<str:intent>/<str:user_id>", m.ManagedConversationView.as_view(), name="managed"),
    path(
        "agents/managed/<str:intent>/<str:user_id>/endConversation",
        m.ManagedEndView.as_view(),
        name="managed-end",
    ),
    path("agents/managed/<str:intent>/<str:user_id>/undo", m.ManagedUndoView.as_view(), name="managed-undo"),
    path("agents/managed/<str:intent>/<str:user_id>/redo", m.ManagedRedoView.as_view(), name="managed-redo"),
    path("agents/pending-approvals", c.PendingApprovalsView.as_view(), name="pending-approvals"),
    path("agents/<str:agent_id>/start", c.StartView.as_view(), name="start"),
    path("agents/<str:conversation_id>/resume", c.ResumeView.as_view(), name="resume"),
    path(
        "agents/<str:conversation_id>/approval-status", c.ApprovalStatusView.as_view(), name="approval-status"
    ),
    path("agents/<str:conversation_id>/undo", c.UndoView.as_view(), name="undo"),
    path("agents/<str:conversation_id>/redo", c.RedoView.as_view(), name="redo"),
    path("agents/<str:conversation_id>/endConversation", c.EndView.as_view(), name="end"),
    path("agents/<str:conversation_id>/cancel", c.CancelView.as_view(), name="cancel"),
    path("agents/<str:conversation_id>", c.ConversationView.as_view(), name="conversation"),
]
