"""A webhook receiver that checks every delivery with the official Standard
Webhooks library (`pip install standardwebhooks`), as a receiver of hookline's
webhooks should. For `hookline listen --forward-to http://localhost:3000/hook`.

    WEBHOOK_SECRET=whsec_... python3 examples/receiver.py 3000

Answers 204 to a delivery that verifies and 400 to one that does not; prints
one line per delivery on stdout.
"""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from standardwebhooks import Webhook

VERIFIER = Webhook(os.environ["WEBHOOK_SECRET"])


class Receiver(BaseHTTPRequestHandler):
    def do_GET(self):
        # A health check, for scripts that wait until the receiver is up.
        self.send_response(200)
        self.end_headers()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            payload = VERIFIER.verify(body, headers)
        except Exception as error:  # the library raises on any mismatch
            print(f"rejected {headers.get('webhook-id')}: {error}", flush=True)
            self.send_response(400)
            self.end_headers()
            return
        print(f"verified {payload['event']} {payload['id']}: {json.dumps(payload['data'])}", flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *_):
        pass


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    HTTPServer(("127.0.0.1", port), Receiver).serve_forever()
