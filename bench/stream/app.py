"""The gunicorn app of bench/stream/run: one call-heavy endpoint (a few thousand Python calls
per request), plain WSGI so that it needs nothing but gunicorn."""


def leaf(i):
    return i * 2


def middle(n):
    return sum(leaf(i) for i in range(n))


def app(environ, start_response):
    total = 0
    for _ in range(20):
        total += middle(100)
    body = ("%d\n" % total).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
