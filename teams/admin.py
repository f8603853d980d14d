"""The back office sees teams, their members and invitations, and their audit log; changes go through the
team pages (owners and admins), so every one is checked against the roles and logged."""

from django.contrib import admin

from .models import Invitation, Membership, Team, TeamEvent


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class MembershipInline(ReadOnlyInline):
    model = Membership
    fields = readonly_fields = ["user", "role", "joined_at"]


class InvitationInline(ReadOnlyInline):
    model = Invitation
    fields = readonly_fields = ["email", "role", "invited_by", "created_at", "expires_at", "accepted_at", "revoked_at"]


class TeamEventInline(ReadOnlyInline):
    model = TeamEvent
    fields = readonly_fields = ["at", "actor", "action", "subject", "detail"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_by", "created_at"]
    search_fields = ["slug", "name", "memberships__user__email"]
    readonly_fields = ["public_id", "slug", "name", "created_by", "created_at"]
    inlines = [MembershipInline, InvitationInline, TeamEventInline]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
