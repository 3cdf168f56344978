"""A small website on a loopback port, served by a thread; its pages can change between syncs."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def page(title: str, body: str, links: list[str] = (), canonical: str | None = None) -> str:
    head = f'<link rel="canonical" href="{canonical}">' if canonical else ""
    anchors = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    return (
        f"<!doctype html><html><head><title>{title}</title>{head}</head><body>"
        f"<nav><ul>{anchors}</ul></nav><article><h1>{title}</h1><p>{body}</p></article></body></html>"
    )


class Site:
    def __init__(self) -> None:
        self.pages: dict[str, tuple[int, str, str]] = {}  # path -> (status, content type or Location, body)
        self.requests: list[str] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.requests.append(self.path)
                status, kind, body = site.pages.get(self.path.split("#")[0], (404, "text/plain", "not found"))
                self.send_response(status)
                if 300 <= status < 400:
                    self.send_header("Location", kind)
                else:
                    self.send_header("Content-Type", kind)
                data = body.encode()
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def html(self, path: str, content: str) -> None:
        self.pages[path] = (200, "text/html; charset=utf-8", content)

    def redirect(self, path: str, location: str) -> None:
        self.pages[path] = (302, location, "")

    def __enter__(self) -> Site:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
