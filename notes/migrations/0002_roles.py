"""Create the Contributor, Rater and Admin groups with their explicit permissions."""

from __future__ import annotations

from typing import Any

from django.db import migrations


def create_roles(apps: Any, schema_editor: Any) -> None:
    from django.contrib.auth.management import create_permissions

    from notes.roles import sync_roles

    # Permissions are normally created after all migrations; the groups need them now.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    sync_roles(apps)


class Migration(migrations.Migration):
    dependencies = [
        ("notes", "0001_initial"),
        ("evidence", "0001_initial"),
        ("judging", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_roles, migrations.RunPython.noop)]
