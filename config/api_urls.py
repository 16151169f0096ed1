"""/api/v1/: the customers' REST API."""

from rest_framework.routers import SimpleRouter

from apps.accounts.api.views import ApiKeyViewSet, AuditEventViewSet, MemberViewSet
from apps.executions.api import DeadLetterViewSet, ExecutionViewSet
from apps.jobs.api import JobViewSet, SchedulePreviewViewSet
from apps.projects.api import ProjectViewSet

router = SimpleRouter()
router.register("projects", ProjectViewSet, basename="project")
router.register("jobs", JobViewSet, basename="job")
router.register("schedules", SchedulePreviewViewSet, basename="schedule")
router.register("executions", ExecutionViewSet, basename="execution")
router.register("dead-letter", DeadLetterViewSet, basename="dead-letter")
router.register("api-keys", ApiKeyViewSet, basename="api-key")
router.register("members", MemberViewSet, basename="member")
router.register("audit-events", AuditEventViewSet, basename="audit-event")

urlpatterns = router.urls
