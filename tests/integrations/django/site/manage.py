#!/usr/bin/env python
"""The test site's manage.py: run from the repository root's PYTHONPATH."""

import os
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.integrations.django.site.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
