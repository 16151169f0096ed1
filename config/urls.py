from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from apps.accounts import otp_views
from apps.archives import views as archive_views
from apps.web.forms import RateLimitedAdminAuthenticationForm
from apps.web.views import auth as web_auth
from apps.web.views import settings as web_settings
from apps.badges.views import badge_image
from apps.observability import dashboard as ops_dashboard
from apps.observability import views as ops


admin.site.site_header = "cronsvc operators"
admin.site.site_title = "cronsvc"
admin.site.login_form = RateLimitedAdminAuthenticationForm  # /login/'s limits on /admin/login/ too

urlpatterns = [
    # The operators' dashboard (staff only), linked from the admin index.
    path("admin/operations/", admin.site.admin_view(ops_dashboard.dashboard), name="operations-dashboard"),
    path("admin/login/", web_auth.admin_login, name="admin-login"),  # /login/'s limits (apps.web.views.auth)
    path("admin/", admin.site.urls),
    path("healthz", ops.healthz, name="healthz"),
    path("readyz", ops.readyz, name="readyz"),
    path("metrics", ops.metrics, name="metrics"),
    # Public status images for READMEs: the unguessable token is the only credential.
    re_path(r"^badge/(?P<token>[A-Za-z0-9_-]{1,64})\.svg$", badge_image, name="badge"),
    # Heartbeat monitors: /ping/<id>[/start|/fail|/<exit code>] and /badge/monitor/<token>.svg.
    path("", include("apps.monitors.urls")),
    path("monitors/", include("apps.monitors.web_urls")),
    path("api/v1/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/v1/", include("config.api_urls")),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    # The customers' pages: sign-up, log-in, password reset, dashboard, jobs, settings.
    path("login/code/", otp_views.login_otp, name="login_otp"),
    path("account/two-factor/", otp_views.two_factor, name="two_factor"),
    path("settings/data/", web_settings.data_and_security, name="data_settings"),
    path("settings/data/export/", web_settings.data_export, name="data_export"),
    path("settings/data/exports/<uuid:pk>/", web_settings.data_export_download, name="data_export_download"),
    path("settings/data/delete/", web_settings.organization_delete, name="organization_delete"),
    path("settings/archives/", archive_views.archive_list, name="archive_list"),
    path("settings/archives/<uuid:pk>/download/", archive_views.archive_download, name="archive_download"),
    path("", include("apps.web.urls")),
]

# Under /api/ even Django's own error pages answer in the API's JSON error format; elsewhere
# Django's default views render templates/400.html, 403.html, 404.html and 500.html.
handler400 = "apps.api.errors.handler400"
handler403 = "apps.api.errors.handler403"
handler404 = "apps.api.errors.handler404"
handler500 = "apps.api.errors.handler500"
