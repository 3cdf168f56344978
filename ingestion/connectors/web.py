"""Web connector: a breadth-first crawl from a start URL and/or a sitemap, same-site by default,
within a depth and a page limit, honouring robots.txt (rules and crawl delay) with a politeness
delay between requests. Canonical URLs (`<link rel=canonical>`, then a normalised form: no
fragment, sorted query, default port dropped) are the items' ids, so one page reached by several
URLs is one document. Redirects are followed by hand, each hop checked like a link, with loops cut.
Pages go to the pipeline as fetched; the HTML parser's trafilatura pass removes the boilerplate.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit
from urllib.robotparser import RobotFileParser

import httpx
from lxml import etree
from lxml import html as lxml_html

from ingestion.connectors.base import Item, SourceError
from ingestion.connectors.guard import AddressGuard

log = logging.getLogger(__name__)
MAX_REDIRECTS = 5
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_SKIP_EXT = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".css", ".js", ".ico", ".zip", ".mp4", ".woff2")


def normalize(url: str) -> str:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    port = parts.port
    if port and not ((parts.scheme == "http" and port == 80) or (parts.scheme == "https" and port == 443)):
        host = f"{host}:{port}"
    query = urlencode(sorted(parse_qsl(parts.query, keep_blank_values=True)))
    return urlunsplit((parts.scheme.lower(), host, parts.path or "/", query, ""))


def _site(url: str) -> str:
    host = (urlsplit(url).hostname or "").lower()
    return host.removeprefix("www.")


class WebConnector:
    def __init__(self, config, guard: AddressGuard, settings) -> None:
        self.config, self.guard = config, guard
        self.delay = max(config.delay_s, settings.web_min_delay_s)
        self.max_bytes = settings.max_bytes
        self.user_agent = settings.web_user_agent
        self.client = httpx.Client(
            timeout=settings.web_timeout_s, follow_redirects=False, headers={"User-Agent": self.user_agent}
        )
        self.spool = tempfile.TemporaryDirectory(prefix="groundwork-crawl-")
        self.robots: dict[str, RobotFileParser] = {}
        self.refused: list[str] = []
        self.skipped: list[str] = []
        self._last_request = 0.0
        self.start_url = str(config.start_url) if config.start_url else None
        self.sitemap_url = str(config.sitemap_url) if config.sitemap_url else None
        self.site = _site(self.start_url or self.sitemap_url)

    # -- requests -----------------------------------------------------------------------------
    def _wait_turn(self) -> None:
        pause = self.delay - (time.monotonic() - self._last_request)
        if pause > 0:
            time.sleep(pause)
        self._last_request = time.monotonic()

    def _get(self, url: str) -> tuple[int, httpx.Headers, bytes]:
        """One GET, its body cut at the size limit (an over-long body is refused, not truncated)."""
        self.guard.check(url)
        self._wait_turn()
        with self.client.stream("GET", url) as response:
            body = bytearray()
            for piece in response.iter_bytes():
                body.extend(piece)
                if len(body) > self.max_bytes:
                    raise SourceError(f"{url}: larger than the {self.max_bytes / 1e6:.0f} MB file limit")
            return response.status_code, response.headers, bytes(body)

    def _robots(self, url: str) -> RobotFileParser:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        if origin not in self.robots:
            parser = RobotFileParser()
            try:
                status, _, body = self._get(origin + "/robots.txt")
                parser.parse(body.decode("utf-8", "replace").splitlines() if status == 200 else [])
            except (httpx.HTTPError, SourceError):
                parser.parse([])
            self.robots[origin] = parser
            crawl_delay = parser.crawl_delay(self.user_agent)
            if crawl_delay:
                self.delay = max(self.delay, float(crawl_delay))
        return self.robots[origin]

    def _allowed(self, url: str) -> bool:
        if urlsplit(url).scheme not in ("http", "https"):
            return False
        if self.config.same_site and _site(url) != self.site:
            return False
        if not self._robots(url).can_fetch(self.user_agent, url):
            self.skipped.append(f"{url} (robots.txt)")
            return False
        return True

    def _resolve(self, url: str) -> tuple[str, httpx.Headers, bytes] | None:
        """Follow redirects by hand; None (and the reason noted) if the page is not to be taken."""
        chain = [url]
        for _ in range(MAX_REDIRECTS + 1):
            try:
                status, headers, body = self._get(url)
            except SourceError as exc:
                (self.refused if "address" in str(exc) or "only http" in str(exc) else self.skipped).append(
                    f"{url} ({exc})"
                )
                return None
            except httpx.HTTPError as exc:
                self.skipped.append(f"{url} ({type(exc).__name__})")
                return None
            if status in (301, 302, 303, 307, 308) and headers.get("location"):
                url = normalize(urljoin(url, headers["location"]))
                if url in chain:
                    self.skipped.append(f"{chain[0]} (redirect loop)")
                    return None
                chain.append(url)
                try:
                    self.guard.check(url)
                except SourceError as exc:
                    self.refused.append(f"{url} ({exc})")
                    return None
                if not self._allowed(url):
                    return None
                continue
            if status != 200:
                self.skipped.append(f"{url} (HTTP {status})")
                return None
            return url, headers, body
        self.skipped.append(f"{chain[0]} (more than {MAX_REDIRECTS} redirects)")
        return None

    # -- crawl --------------------------------------------------------------------------------
    def _sitemap_urls(self, url: str, depth: int = 0) -> list[str]:
        resolved = self._resolve(normalize(url))
        if resolved is None:
            raise SourceError(f"the sitemap {url} could not be read")
        try:
            root = etree.fromstring(resolved[2], etree.XMLParser(resolve_entities=False, no_network=True))
        except etree.XMLSyntaxError:
            raise SourceError(f"the sitemap {url} is not valid XML") from None
        locs = [(el.text or "").strip() for el in root.iter("{*}loc")]
        if etree.QName(root).localname == "sitemapindex" and depth == 0:
            return [u for loc in locs for u in self._sitemap_urls(loc, 1)]
        return [u for u in locs if u]

    def _links(self, base: str, body: bytes) -> tuple[str | None, list[str]]:
        try:
            tree = lxml_html.fromstring(body)
        except (etree.ParserError, ValueError):
            return None, []
        canonical = None
        for link in tree.xpath("//link[@rel='canonical']/@href"):
            canonical = normalize(urljoin(base, link.strip()))
        links = []
        for href in tree.xpath("//a/@href"):
            href = href.strip()
            if href and not href.startswith(("#", "mailto:", "javascript:", "tel:")):
                links.append(normalize(urljoin(base, href)))
        return canonical, links

    def list_items(self) -> Iterator[Item]:
        seeds: list[str] = []
        if self.start_url:
            self.guard.check(self.start_url)  # a refused start is the sync's failure
            seeds.append(normalize(self.start_url))
        if self.sitemap_url:
            seeds.extend(normalize(u) for u in self._sitemap_urls(self.sitemap_url))
        frontier: deque[tuple[str, int]] = deque((u, 0) for u in dict.fromkeys(seeds))
        queued = {u for u, _ in frontier}
        taken: set[str] = set()
        pages = 0
        while frontier and pages < self.config.max_pages:
            url, depth = frontier.popleft()
            if urlsplit(url).path.lower().endswith(_SKIP_EXT) or not self._allowed(url):
                continue
            resolved = self._resolve(url)
            if resolved is None:
                continue
            final, headers, body = resolved
            pages += 1
            kind = headers.get("content-type", "").split(";")[0].strip().lower()
            canonical, links = self._links(final, body) if kind in _HTML_TYPES else (None, [])
            item_id = canonical if canonical and _site(canonical) == self.site else final
            for link in links if depth < self.config.max_depth else []:
                if link not in queued:
                    queued.add(link)
                    frontier.append((link, depth + 1))
            if item_id in taken:
                self.skipped.append(f"{url} (duplicate of {item_id})")
                continue
            taken.add(item_id)
            version = hashlib.sha256(body).hexdigest()
            spooled = Path(self.spool.name) / version
            spooled.write_bytes(body)
            name = urlsplit(item_id).path.rsplit("/", 1)[-1] or "index"
            if kind in _HTML_TYPES and not name.lower().endswith((".html", ".htm")):
                name += ".html"
            yield Item(item_id, version, name, metadata={"url": item_id, "content_type": kind})

    def fetch(self, item: Item) -> bytes:
        return (Path(self.spool.name) / item.version).read_bytes()

    def state(self) -> dict:
        return {}

    def details(self) -> dict:
        return {k: v[:50] for k, v in (("refused", self.refused), ("skipped", self.skipped)) if v}

    def close(self) -> None:
        self.client.close()
        self.spool.cleanup()
