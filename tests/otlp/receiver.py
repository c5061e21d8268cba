"""An OTLP/HTTP trace receiver for tests/e2e/otlp.rs, built on the OpenTelemetry
project's own generated protobuf classes (PyPI's opentelemetry-proto): every POST body is
parsed with `ExportTraceServiceRequest.FromString`, as a collector's OTLP receiver parses
it, and each span is written as one JSON line for the test to read.

    python receiver.py SPANS.jsonl    # prints its port, then serves until killed

A body that does not parse is answered 400 and written as `{"error": ...}`, so the test
sees it. Loopback only.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Lock

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

OUT = open(sys.argv[1], "a", encoding="utf-8")
LOCK = Lock()


def value(v):
    """An AnyValue as plain JSON: the one field it holds."""
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def attributes(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


def span_line(resource, content_type, span):
    return {
        "resource": attributes(resource.attributes),
        "content_type": content_type,
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent_span_id": span.parent_span_id.hex(),
        "name": span.name,
        "kind": span.kind,
        "start_time_unix_nano": span.start_time_unix_nano,
        "end_time_unix_nano": span.end_time_unix_nano,
        "attributes": attributes(span.attributes),
        "events": [
            {"name": e.name, "time_unix_nano": e.time_unix_nano} for e in span.events
        ],
        "status_code": span.status.code,
    }


class Traces(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        content_type = self.headers.get("Content-Type", "")
        try:
            request = ExportTraceServiceRequest.FromString(body)
        except DecodeError as e:
            self.write([{"error": str(e), "path": self.path}])
            self.send_response(400)
            self.end_headers()
            return
        lines = [
            span_line(rs.resource, content_type, span)
            for rs in request.resource_spans
            for ss in rs.scope_spans
            for span in ss.spans
        ]
        if self.path != "/v1/traces":
            lines = [{"error": "posted to " + self.path}]
        self.write(lines)
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def write(self, lines):
        # Written before the answer: once the client heard 200, its spans are on disk.
        with LOCK:
            for line in lines:
                OUT.write(json.dumps(line) + "\n")
            OUT.flush()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Traces)
print(server.server_address[1], flush=True)
server.serve_forever()
