"""A tiny "real system" for the recording and drift guides of the book: a JSON API on a
loopback port, standard library only.

    python3 tiny_api.py PORT [--v2]

GET  /api/contacts/{id}  -> 200 {"id", "name", "age"}        (404 for an unknown id)
POST /api/contacts       -> 201 {"id": "103", "name": <name>}
--v2 answers `age` as a string and drops `name`: the kind of change `understudy drift` reports.
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CONTACTS = {"101": {"id": "101", "name": "Ada", "age": 36}, "102": {"id": "102", "name": "Alan", "age": 41}}
V2 = "--v2" in sys.argv


class Handler(BaseHTTPRequestHandler):
    def send_json(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        parts = self.path.split("?")[0].strip("/").split("/")
        if len(parts) == 3 and parts[:2] == ["api", "contacts"] and parts[2] in CONTACTS:
            c = dict(CONTACTS[parts[2]])
            if V2:
                c["age"] = str(c["age"])
                del c["name"]
            return self.send_json(200, c)
        self.send_json(404, {"error": "not found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path.rstrip("/") == "/api/contacts":
            return self.send_json(201, {"id": "103", "name": body.get("name", "")})
        self.send_json(404, {"error": "not found"})

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
