"""``gitmem serve``: a read-only web view of a store for people (docs/web.md); needs the
``web`` extra (Jinja2, markdown-it-py, nh3)."""
