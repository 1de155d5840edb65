"""The Flask app of tests/unit/test_requests.py: GET /item/N does a little work, and when the
client asks for the slow path (?slow=1) also calls slow_lookup, which sleeps 100 ms: the
slow requests' heaviest path must go through slow_lookup to time.sleep."""
import time

from flask import Flask, request

app = Flask(__name__)


def fast_lookup(n):
    return sum(i * i for i in range(n))


def slow_lookup(n):
    time.sleep(0.1)
    return fast_lookup(n)


def lookup(n, slow):
    return slow_lookup(n) if slow else fast_lookup(n)


@app.route("/item/<int:n>")
def item(n):
    return "item %d: %d\n" % (n, lookup(100 + n % 50, request.args.get("slow") == "1"))
