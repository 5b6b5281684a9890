"""A read-only admin page of secret names and update times; values never appear."""

from __future__ import annotations

from typing import Any

from django.contrib import admin

from approvals.access import is_admin
from toolgate.models import StoredSecret


@admin.register(StoredSecret)
class StoredSecretAdmin(admin.ModelAdmin):
    list_display = ("name", "updated_at", "created_at")
    fields = ("name", "updated_at", "created_at")
    readonly_fields = fields
    search_fields = ("name",)

    def has_module_permission(self, request: Any) -> bool:
        return is_admin(request.user)

    def has_view_permission(self, request: Any, obj: Any = None) -> bool:
        return is_admin(request.user)

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: Any) -> Any:
        return super().get_queryset(request).defer("ciphertext")
