from django.urls import path

from . import web_views

app_name = "monitors"
urlpatterns = [
    path("", web_views.monitor_list, name="list"),
    path("new/", web_views.monitor_create, name="create"),
    path("preview/", web_views.monitor_preview, name="preview"),
    path("<uuid:pk>/", web_views.monitor_detail, name="detail"),
    path("<uuid:pk>/edit/", web_views.monitor_edit, name="edit"),
    path("<uuid:pk>/delete/", web_views.monitor_delete, name="delete"),
    path("<uuid:pk>/pause/", web_views.monitor_pause, name="pause"),
    path("<uuid:pk>/resume/", web_views.monitor_resume, name="resume"),
]
