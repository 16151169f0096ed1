"""/api/v1/: the customers' REST API."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from apps.api.accounts.gdpr_views import DataExportViewSet, OrganizationDeletionView
from apps.api.accounts.invitation_views import InvitationViewSet
from apps.api.accounts.views import ApiKeyViewSet, AuditEventViewSet, MemberViewSet
from apps.archives.api import ArchiveViewSet
from apps.billing.api import UsageView
from apps.badges.api import BadgeViewSet
from apps.executions.history.api import DeadLetterViewSet, ExecutionViewSet, ProjectExecutionViewSet
from apps.executions.history.job_api import JobViewSet
from apps.executions.history.stats_api import StatsView
from apps.jobs.api import SchedulePreviewViewSet
from apps.monitors.api import MonitorViewSet
from apps.notifications.api import (ChannelViewSet, EventSubscriptionViewSet, JobRuleView, NotificationViewSet,
                                    ProjectRuleView)
from apps.projects.api import ProjectViewSet
from apps.workflows.api import WorkflowRunViewSet

router = SimpleRouter()
router.register("projects", ProjectViewSet, basename="project")
router.register("jobs", JobViewSet, basename="job")
router.register("schedules", SchedulePreviewViewSet, basename="schedule")
router.register("executions", ExecutionViewSet, basename="execution")
router.register("dead-letter", DeadLetterViewSet, basename="dead-letter")
router.register("workflow-runs", WorkflowRunViewSet, basename="workflow-run")
router.register("api-keys", ApiKeyViewSet, basename="api-key")
router.register("members", MemberViewSet, basename="member")
router.register("invitations", InvitationViewSet, basename="invitation")
router.register("audit-events", AuditEventViewSet, basename="audit-event")
router.register("organization/exports", DataExportViewSet, basename="organization-export")
router.register("archives", ArchiveViewSet, basename="archive")
router.register("badges", BadgeViewSet, basename="badge-api")
router.register("monitors", MonitorViewSet, basename="monitor")

router.register("channels", ChannelViewSet, basename="channel")
router.register("notifications", NotificationViewSet, basename="notification")
router.register("event-subscriptions", EventSubscriptionViewSet, basename="event-subscription")

urlpatterns = router.urls
urlpatterns += [
    path("usage/", UsageView.as_view(), name="usage"),
    path("stats/", StatsView.as_view(), name="stats"),
    path("organization/deletion/", OrganizationDeletionView.as_view(), name="organization-deletion"),
    path("jobs/<uuid:pk>/notification-rule/", JobRuleView.as_view(), name="job-notification-rule"),
    path("projects/<uuid:pk>/notification-rule/", ProjectRuleView.as_view(), name="project-notification-rule"),
    path("projects/<uuid:pk>/executions/", ProjectExecutionViewSet.as_view({"get": "list"}), name="project-executions"),
]
