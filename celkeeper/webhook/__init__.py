"""The admission webhook: a WSGI app per Gunicorn worker, served by `celkeeper serve`.

create_app(WebhookConfig(settings, state)) -> WebhookApp     celkeeper.webhook.app
serve(ServerOptions(...), ServerTLS(...), app_factory, informer=...)   celkeeper.webhook.server
LivePolicies (a worker's current policies)              celkeeper.webhook.live
"""
