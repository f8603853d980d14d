from django.contrib import admin

from .models import Chip, InstanceSpec, Node, Region, ScalingFigure, Zone


@admin.register(Region)
class RegionAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "name_zh", "sort_order"]
    search_fields = ["slug", "name", "name_zh"]


@admin.register(Zone)
class ZoneAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "name_zh", "region", "xinchuang", "active"]
    list_filter = ["region", "xinchuang", "active"]
    search_fields = ["slug", "name", "name_zh"]
    list_select_related = ["region"]


class ScalingFigureInline(admin.TabularInline):
    model = ScalingFigure
    extra = 0


@admin.register(Chip)
class ChipAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "vendor", "backend", "xinchuang", "rentable", "memory_gb", "tflops_bf16", "mfu"]
    list_filter = ["backend", "xinchuang", "rentable", "vendor"]
    search_fields = ["slug", "name", "name_zh", "vendor"]
    inlines = [ScalingFigureInline]


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "zone", "chip", "cards", "backend_name", "drained"]
    list_filter = ["zone", "chip", "backend_name", "drained"]
    search_fields = ["name"]
    list_select_related = ["zone", "chip"]
    list_editable = ["drained"]


@admin.register(InstanceSpec)
class InstanceSpecAdmin(admin.ModelAdmin):
    list_display = ["slug", "chip", "cards", "vcpus", "memory_gb", "system_disk_gb", "active"]
    list_filter = ["chip", "cards", "active"]
    search_fields = ["slug"]
    list_select_related = ["chip"]
