from django.urls import path

from . import web_views

app_name = "monitors"
urlpatterns = [
    path("", web_views.monitor_list, name="list"),
    path("<uuid:pk>/", web_views.monitor_detail, name="detail"),
    path("<uuid:pk>/pause/", web_views.monitor_pause, name="pause"),
    path("<uuid:pk>/resume/", web_views.monitor_resume, name="resume"),
]
