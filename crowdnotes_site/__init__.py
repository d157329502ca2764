"""Settings, the Celery app and what every app shares. Importing this package imports nothing:
`crowdnotes_site.lib` (pure cores) must load in a plain Python process without Django. The
Celery app is loaded where it is used: `celery -A crowdnotes_site` finds `crowdnotes_site.celery`
by itself, and other processes load it on their first send (`crowdnotes_site.queue.broker_app`)."""
