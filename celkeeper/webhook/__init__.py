"""The admission webhook: a Flask app per Gunicorn worker, served by `celkeeper serve`.

create_app(WebhookConfig(settings, state)) -> Flask     celkeeper.webhook.app
serve(ServerOptions(...), ServerTLS(...), app_factory, informer=...)   celkeeper.webhook.server
LivePolicies (a worker's current policies)              celkeeper.webhook.live
"""
