from django.contrib import admin
from django.http import JsonResponse
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView


def healthz(request):
    return JsonResponse({"status": "ok"})


admin.site.site_header = "cronsvc operators"
admin.site.site_title = "cronsvc"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("api/v1/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/v1/", include("config.api_urls")),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    # The customers' pages: sign-up, log-in, password reset, dashboard, jobs, settings.
    path("", include("apps.web.urls")),
]

# Under /api/ even Django's own error pages answer in the API's JSON error format; elsewhere
# Django's default views render templates/400.html, 403.html, 404.html and 500.html.
handler400 = "apps.accounts.api.errors.handler400"
handler403 = "apps.accounts.api.errors.handler403"
handler404 = "apps.accounts.api.errors.handler404"
handler500 = "apps.accounts.api.errors.handler500"
