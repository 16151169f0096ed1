from django.contrib import admin

from .models import Plan


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    list_display = ["code", "name", "max_jobs", "min_interval_seconds", "monthly_executions", "queue", "monthly_price_cents"]
    search_fields = ["code", "name"]
