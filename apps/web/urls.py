"""The customers' pages. Everything under /api/ and /admin/ is elsewhere."""

from django.urls import path

from apps.billing import views as billing_views
from apps.notifications import views as notification_views
from apps.workflows import views as workflow_views

from .views import auth, invitations, jobs, operations, sso
from .views import runs
from .views import settings as settings_views

app_name = "web"

urlpatterns = [
    # accounts
    path("signup/", auth.signup, name="signup"),
    path("welcome/", auth.welcome, name="welcome"),
    path("login/", auth.LoginView.as_view(), name="login"),
    path("logout/", auth.LogoutView.as_view(), name="logout"),
    path("password-reset/", auth.password_reset, name="password_reset"),
    path("password-reset/sent/", auth.password_reset_done, name="password_reset_done"),
    path("password-reset/<uidb64>/<token>/", auth.password_reset_confirm, name="password_reset_confirm"),
    path("password-reset/done/", auth.password_reset_complete, name="password_reset_complete"),
    path("invitation/<str:token>/", invitations.accept, name="invitation"),
    path("sso/", sso.sso_login, name="sso_login"),
    path("sso/callback/", sso.sso_callback, name="sso_callback"),
    # jobs
    path("", jobs.dashboard, name="dashboard"),
    path("jobs/new/", jobs.job_create, name="job_create"),
    path("jobs/preview/", jobs.schedule_preview, name="schedule_preview"),
    path("jobs/test-run/", jobs.test_run, name="test_run"),
    path("jobs/<uuid:pk>/", jobs.job_detail, name="job_detail"),
    path("jobs/<uuid:pk>/edit/", jobs.job_edit, name="job_edit"),
    path("jobs/<uuid:pk>/test-run/", jobs.test_run, name="job_test_run"),
    path("jobs/<uuid:pk>/history/", jobs.job_history, name="job_history"),
    path("jobs/<uuid:pk>/stats/", jobs.job_stats, name="job_stats"),
    path("jobs/<uuid:pk>/pause/", jobs.job_pause, name="job_pause"),
    path("jobs/<uuid:pk>/resume/", jobs.job_resume, name="job_resume"),
    path("jobs/<uuid:pk>/trigger/", jobs.job_trigger, name="job_trigger"),
    path("jobs/<uuid:pk>/duplicate/", jobs.job_duplicate, name="job_duplicate"),
    path("jobs/<uuid:pk>/delete/", jobs.job_delete, name="job_delete"),
    path("executions/<uuid:pk>/", jobs.execution_detail, name="execution_detail"),
    path("executions/<uuid:pk>/cancel/", runs.execution_cancel, name="execution_cancel"),
    path("jobs/<uuid:pk>/versions/", runs.job_versions, name="job_versions"),
    path("jobs/<uuid:pk>/versions/<int:number>/rollback/", runs.job_version_rollback, name="job_version_rollback"),
    path("workflow-runs/<uuid:pk>/", workflow_views.workflow_run, name="workflow_run"),
    path("dead-letter/", operations.dead_letter, name="dead_letter"),
    path("dead-letter/replay/", operations.dead_letter_replay, name="dead_letter_replay"),
    path("import/", operations.crontab_import, name="crontab_import"),
    # settings
    path("settings/", settings_views.organization, name="settings"),
    path("settings/organization/rename/", settings_views.organization_rename, name="organization_rename"),
    path("settings/projects/new/", settings_views.project_create, name="project_create"),
    path("settings/projects/<uuid:pk>/", settings_views.project_edit, name="project_edit"),
    path("settings/projects/<uuid:pk>/delete/", settings_views.project_delete, name="project_delete"),
    path("settings/projects/<uuid:pk>/signing-secrets/", settings_views.signing_secrets, name="signing_secrets"),
    path("settings/members/", settings_views.members, name="members"),
    path("settings/members/invite/", settings_views.member_invite, name="member_invite"),
    path("settings/members/<uuid:user_id>/role/", settings_views.member_change, name="member_change"),
    path("settings/members/<uuid:user_id>/remove/", settings_views.member_remove, name="member_remove"),
    path("settings/invitations/<uuid:pk>/resend/", settings_views.invitation_resend, name="invitation_resend"),
    path("settings/invitations/<uuid:pk>/revoke/", settings_views.invitation_revoke, name="invitation_revoke"),
    path("settings/api-keys/", settings_views.api_keys, name="api_keys"),
    path("settings/api-keys/new/", settings_views.api_key_create, name="api_key_create"),
    path("settings/api-keys/<uuid:pk>/revoke/", settings_views.api_key_revoke, name="api_key_revoke"),
    path("settings/plan/", settings_views.plan, name="plan"),
    path("settings/sso/", sso.sso_settings, name="sso_settings"),
    path("settings/statements/<int:pk>/", billing_views.statement, name="statement"),
    path("organization/switch/", settings_views.switch_organization, name="switch_organization"),
    # notifications (apps.notifications)
    path("notifications/", notification_views.index, name="notifications"),
    path("notifications/log/", notification_views.log, name="notification_log"),
    path("notifications/projects/<uuid:project_pk>/channels/new/", notification_views.channel_create,
         name="channel_create"),
    path("notifications/projects/<uuid:project_pk>/rule/", notification_views.project_rule, name="project_rule"),
    path("notifications/channels/<uuid:pk>/", notification_views.channel_edit, name="channel_edit"),
    path("notifications/channels/<uuid:pk>/delete/", notification_views.channel_delete, name="channel_delete"),
    path("notifications/channels/<uuid:pk>/test/", notification_views.channel_test, name="channel_test"),
    path("jobs/<uuid:pk>/notification-rule/", notification_views.job_rule, name="job_rule"),
]
