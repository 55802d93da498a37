"""Jinja2 templates for reports and the replay viewer (a package only so that wheels ship the files)."""
