"""HTTP delivery engine: everything between "this execution is due" and "here is its outcome".

Free of Django on purpose, so the Celery task is thin glue and each piece is tested alone:

- ``request``   what to send: the spec, header rules, the prepared request per attempt
- ``template``  body templates (``{{ job.name }}``), escaped per body format
- ``signing``   Standard Webhooks signatures
- ``guard``     which addresses may be reached (SSRF), enforced at socket-open time
- ``transport`` the urllib3 connection classes that apply the guard and deadline
- ``deadline``  the total deadline per delivery (a watchdog thread shuts sockets down)
- ``client``    sending one delivery and reporting what happened, never raising
- ``outcome``   success criteria and the classification of a result
- ``saferegex`` customer regexes searched in linear time
- ``retry``     whether and when to try again
- ``breaker``   per-host circuit breaker shared through Redis
- ``limits``    per-organization concurrency semaphore and token bucket in Redis
- ``errors``    ``InvalidRequest(code, field, message)`` for clear 4xx responses
"""
