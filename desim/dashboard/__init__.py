"""The local research dashboard (``desim dashboard``): a web page over a studies folder.

``app.create_app(studies_dir)`` builds the Starlette app; ``data`` holds its
read-only queries; ``static/`` the one-page app (no CDN, works offline).
"""
