from django import forms
from django.contrib import admin
from django.db import transaction
from django.urls import reverse
from django.utils.html import format_html

from apps.accounts.admin_helpers import HidesSecrets, ReadOnlyAdmin
from cronsvc.schedules import ScheduleError
from cronsvc.schedules.window_parse import blackouts_to_list, parse_blackouts, parse_windows, windows_to_list

from apps.sql.clock import database_now

from . import services, validation, versions
from .models import Job, JobVersion


class JobAdminForm(forms.ModelForm):
    """Windows and blackouts checked by the engine's parser, as the API checks them."""

    class Meta:
        model = Job
        fields = "__all__"  # noqa: DJ007 - the admin edits every column

    def clean_windows(self):
        return _engine_checked(self.cleaned_data.get("windows"), parse_windows, windows_to_list, "windows")

    def clean_blackouts(self):
        return _engine_checked(self.cleaned_data.get("blackouts"), parse_blackouts, blackouts_to_list, "blackouts")


def _engine_checked(value, parse, to_list, field):
    try:
        return to_list(parse(value, field))
    except ScheduleError as exc:
        raise forms.ValidationError(exc.message, code=exc.code) from None


@admin.register(Job)
class JobAdmin(HidesSecrets, admin.ModelAdmin):
    form = JobAdminForm
    list_display = ["name", "organization", "project", "schedule_type", "cron_expression", "enabled",
                    "priority", "next_run_at", "last_status", "consecutive_failures"]
    list_filter = ["enabled", "schedule_type", "last_status", "priority", "outside_window", "misfire_policy",
                   "overlap_policy"]
    search_fields = ["name", "url", "organization__name", "project__name"]
    list_select_related = ["organization", "project"]
    raw_id_fields = ["organization", "project"]
    readonly_fields = ["id", "version", "versions_link", "next_run_at", "last_run_at", "last_status",
                       "consecutive_failures", "expired_at", "created_at", "updated_at"]
    show_full_result_count = False
    actions = ["pause", "resume"]

    def get_queryset(self, request):
        return super().get_queryset(request).with_due()

    def save_model(self, request, obj, form, change):
        """An operator's edit keeps a version too (apps.jobs.versions), in the save's transaction.
        A new job, a schedule edit or a re-enable sets the due time from now, as the API's do."""
        author = versions.Author(user=request.user)
        changed = set(form.changed_data) if form is not None else set()
        if obj.enabled and (not change or "enabled" in changed or validation.RESCHEDULING_FIELDS & changed):
            services.reschedule(obj, now=database_now())
        with transaction.atomic():
            if not change:
                super().save_model(request, obj, form, change)
                versions.record(obj, None, [], author=author, source=JobVersion.Source.ADMIN)
                return
            dependencies = versions.stored_dependencies(obj)
            before = versions.definition(Job.objects.get(pk=obj.pk), dependencies)
            versions.record(obj, before, dependencies, author=author, source=JobVersion.Source.ADMIN)
            super().save_model(request, obj, form, change)

    @admin.display(description="Versions")
    def versions_link(self, obj):
        if obj.pk is None:
            return "-"
        url = reverse("admin:jobs_jobversion_changelist") + f"?job__id__exact={obj.pk}"
        return format_html('<a href="{}">Every version of this job (now {})</a>', url, obj.version)

    @admin.action(description="Pause the selected jobs")
    def pause(self, request, queryset):
        for job in queryset.filter(enabled=True):
            services.pause_job(job, reason="Paused by an operator")
        self.message_user(request, "Paused the selected jobs.")

    @admin.action(description="Resume the selected jobs")
    def resume(self, request, queryset):
        for job in queryset.filter(enabled=False):
            services.resume_job(job)
        self.message_user(request, "Resumed the selected jobs.")


@admin.register(JobVersion)
class JobVersionAdmin(HidesSecrets, ReadOnlyAdmin):
    """Versions are written by the job services only: read here, never edited."""

    list_display = ["job", "number", "created_at", "source", "actor_user", "actor_api_key", "rollback_of"]
    list_filter = ["source"]
    search_fields = ["=job__id", "job__name"]
    list_select_related = ["job", "actor_user", "actor_api_key"]
    raw_id_fields = ["job", "organization", "actor_user", "actor_api_key"]
