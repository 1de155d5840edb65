"""A small Flask app for the gunicorn tree tests (tests/system/test_tree.py): one handler that does
a little Python work, so that handler frames show up in every worker's trace."""
from flask import Flask

app = Flask(__name__)


def handler_work(n):
    return sum(i * i for i in range(n))


@app.route("/")
def hello():
    return "ok %d\n" % handler_work(200)
