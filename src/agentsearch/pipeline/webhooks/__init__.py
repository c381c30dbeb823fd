"""Completion webhooks: a job's end posted to the URLs its user registered, signed the Standard Webhooks way.

Framework-free, like the rest of ``pipeline``: the Celery tasks that drive it are ``agentsearch.worker.webhooks``, the
routes ``agentsearch.api.routes.webhooks``.

- ``events``: the event types and the body a delivery carries (``event_payload``);
- ``secret``: a new signing secret (``whsec_<base64>``);
- ``signer``: the ``webhook-id``, ``webhook-timestamp`` and ``webhook-signature`` headers of one attempt;
- ``target``: a webhook URL checked when it is registered (http/https, a host the egress guard lets through);
- ``schedule``: when a failed delivery is tried again (exponential, jittered, within the retry window);
- ``outbox``: the delivery rows a job's end writes in the transaction that ends it, and who hears of them after
  the commit;
- ``sender``: one HTTP attempt through the egress guard, bounded as a whole by its timeout (``deadline``);
- ``quota``: how many webhooks a user may have, and how many of its attempts may be out at once;
- ``courier``: one attempt of one delivery, from taking it (one at a time, within its user's cap) to recording what
  happened.

Usage::

    with db.session() as s:
        job.status = "succeeded"
        record_job_end(s, job)                      # delivery rows, committed with the job's end
    Courier(db, WebhookSender(policy), RetrySchedule()).attempt(delivery_id)
"""
