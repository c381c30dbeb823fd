"""What stands between a user's request and the service's own reach: the egress guard (``egress``) and the HTTP
clients that apply it when they connect (``transports``)."""
