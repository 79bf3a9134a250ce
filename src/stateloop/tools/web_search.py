"""Letta's ``web_search`` tool, answered by the search service the operator configured.

Exa (``EXA_API_KEY``), Tavily (``TAVILY_API_KEY``) or a SearXNG instance of one's own
(``STATELOOP_SEARXNG_URL``, its JSON format enabled); ``STATELOOP_WEB_SEARCH`` picks one
when several are set, otherwise the first of that order. The variables are read at each call.
With none, the call fails telling the model (and the operator reading the transcript) what
to set. A search has a deadline (``STATELOOP_WEB_TIMEOUT``, 20 s). Results come back in
Letta's shape: a JSON object with the query and, for each result, title, url,
published_date, author, highlights or summary, and the page's text when asked for.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import anyio
import httpx2

TIMEOUT = 20.0  # seconds for a search; STATELOOP_WEB_TIMEOUT changes it
BACKENDS = ("exa", "tavily", "searxng")
MAX_RESPONSE_BYTES = 5_000_000

Category = Literal["company", "research paper", "news", "pdf", "github", "tweet",
                   "personal site", "linkedin profile", "financial report"]


@dataclass(frozen=True, slots=True)
class SearchSettings:
    """Which search service answers, and how to reach it."""

    backend: str
    url: str
    key: str | None = None
    timeout: float = TIMEOUT

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SearchSettings:
        """The service the variables configure; ``ValueError`` saying what to set."""
        configured = {
            "exa": (env.get("STATELOOP_EXA_BASE_URL") or "https://api.exa.ai",
                    env.get("EXA_API_KEY")),
            "tavily": (env.get("STATELOOP_TAVILY_BASE_URL") or "https://api.tavily.com",
                       env.get("TAVILY_API_KEY")),
            "searxng": (env.get("STATELOOP_SEARXNG_URL"), None),
        }
        ready = [name for name in BACKENDS
                 if configured[name][1] or (name == "searxng" and configured[name][0])]
        wanted = (env.get("STATELOOP_WEB_SEARCH") or "").strip().lower()
        if wanted and wanted not in BACKENDS:
            raise ValueError(f"STATELOOP_WEB_SEARCH is {wanted!r}; expected one of "
                             f"{', '.join(BACKENDS)}")
        if wanted and wanted not in ready:
            needs = "STATELOOP_SEARXNG_URL" if wanted == "searxng" else \
                f"{wanted.upper()}_API_KEY"
            raise ValueError(f"STATELOOP_WEB_SEARCH is {wanted!r} but {needs} is not set")
        if not ready:
            raise ValueError("web search is not configured on this server: set EXA_API_KEY, "
                             "TAVILY_API_KEY or STATELOOP_SEARXNG_URL (a SearXNG instance "
                             "with the JSON format enabled)")
        name = wanted or ready[0]
        url, key = configured[name]
        assert url is not None
        return cls(name, url.rstrip("/"), key, web_timeout(env))


@dataclass(frozen=True, slots=True)
class Query:
    """Letta's parameters, clamped."""

    query: str
    num_results: int
    category: str | None
    include_text: bool
    include_domains: list[str]
    exclude_domains: list[str]
    start_published_date: str | None
    end_published_date: str | None
    user_location: str | None


async def web_search(
    query: str,
    num_results: int = 10,
    category: Category | None = None,
    include_text: bool = False,
    include_domains: list[str] | None = None,
    exclude_domains: list[str] | None = None,
    start_published_date: str | None = None,
    end_published_date: str | None = None,
    user_location: str | None = None,
) -> str:
    """Search the web and retrieve relevant content.

    Examples:
    web_search("Tesla Q1 2025 earnings report", num_results=5, category="financial report")
    web_search("Latest research in large language models", category="research paper", include_domains=["arxiv.org", "paperswithcode.com"])
    web_search("Letta API documentation core_memory_append", num_results=3)

    Args:
        query: The search query to find relevant web content.
        num_results: Number of results to return (1-100). Defaults to 10.
        category: Focus search on specific content types. Defaults to None.
        include_text: Whether to retrieve full page content. Defaults to False (only returns summary and highlights, since the full text usually will overflow the context window).
        include_domains: List of domains to include in search results. Defaults to None.
        exclude_domains: List of domains to exclude from search results. Defaults to None.
        start_published_date: Only return content published after this date (ISO format). Defaults to None.
        end_published_date: Only return content published before this date (ISO format). Defaults to None.
        user_location: Two-letter country code for localized results (e.g., "US"). Defaults to None.
    """  # noqa: E501 - Letta's own text, as its models were prompted with
    if not query.strip():
        return json.dumps({"error": "Query cannot be empty", "query": query})
    settings = SearchSettings.from_env(os.environ)
    asked = Query(query, min(max(num_results, 1), 100), category, include_text,
                  list(include_domains or ()), list(exclude_domains or ()),
                  start_published_date, end_published_date, user_location)
    try:
        with anyio.fail_after(settings.timeout):
            async with httpx2.AsyncClient(timeout=settings.timeout, trust_env=False) as client:
                results = await _SEARCHES[settings.backend](client, settings, asked)
    except TimeoutError:
        return json.dumps({"query": query, "error": f"Search failed ({settings.backend}): no "
                                                    f"answer within {settings.timeout:g} s"})
    except (httpx2.HTTPError, ValueError, KeyError, TypeError) as exc:
        return json.dumps({"query": query,
                           "error": f"Search failed ({settings.backend}): {_said(exc)}"})
    return json.dumps({"query": query, "results": results[:asked.num_results]}, indent=2,
                      ensure_ascii=False)


def web_timeout(env: Mapping[str, str]) -> float:
    """``STATELOOP_WEB_TIMEOUT``: seconds a search, or a page fetch, may take."""
    raw = env.get("STATELOOP_WEB_TIMEOUT")
    try:
        seconds = float(raw) if raw else TIMEOUT
    except ValueError:
        seconds = 0
    if not 0 < seconds <= 600:
        raise ValueError(f"STATELOOP_WEB_TIMEOUT must be seconds between 0 and 600, not {raw!r}")
    return seconds


def _said(exc: BaseException) -> str:
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"HTTP {exc.response.status_code}: {exc.response.text[:300]}"
    return str(exc) or type(exc).__name__


async def _post(client: httpx2.AsyncClient, url: str, body: dict[str, Any],
                headers: dict[str, str]) -> Any:
    response = await client.post(url, json=body, headers=headers)
    response.raise_for_status()
    if len(response.content) > MAX_RESPONSE_BYTES:
        raise ValueError(f"the answer was over {MAX_RESPONSE_BYTES} bytes")
    return response.json()


def _result(title: Any, url: Any, published: Any = None, author: Any = None, *,
            text: Any = None, highlights: Any = None, summary: Any = None) -> dict[str, Any]:
    found: dict[str, Any] = {"title": title, "url": url, "published_date": published,
                             "author": author}
    for name, value in (("text", text), ("highlights", highlights), ("summary", summary)):
        if value:
            found[name] = value
    return found


async def _exa(client: httpx2.AsyncClient, settings: SearchSettings, q: Query
               ) -> list[dict[str, Any]]:
    body: dict[str, Any] = {
        "query": q.query, "numResults": q.num_results, "type": "auto",
        "contents": {"text": q.include_text,
                     "highlights": {"numSentences": 2, "highlightsPerUrl": 3, "query": q.query},
                     "summary": {"query": "Summarize the key information from this content "
                                          f"related to: {q.query}"}}}
    for key, value in (("category", q.category), ("includeDomains", q.include_domains),
                       ("excludeDomains", q.exclude_domains),
                       ("startPublishedDate", q.start_published_date),
                       ("endPublishedDate", q.end_published_date),
                       ("userLocation", q.user_location)):
        if value:
            body[key] = value
    answer = await _post(client, f"{settings.url}/search", body,
                         {"x-api-key": settings.key or ""})
    return [_result(r.get("title"), r.get("url"), r.get("publishedDate"), r.get("author"),
                    text=r.get("text") if q.include_text else None,
                    highlights=r.get("highlights"), summary=r.get("summary"))
            for r in answer.get("results") or ()]


async def _tavily(client: httpx2.AsyncClient, settings: SearchSettings, q: Query
                  ) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"query": q.query, "max_results": min(q.num_results, 20),
                            "topic": "news" if q.category == "news" else "general",
                            "include_raw_content": q.include_text}
    for key, value in (("include_domains", q.include_domains),
                       ("exclude_domains", q.exclude_domains),
                       ("start_date", (q.start_published_date or "")[:10]),
                       ("end_date", (q.end_published_date or "")[:10])):
        if value:
            body[key] = value
    answer = await _post(client, f"{settings.url}/search", body,
                         {"Authorization": f"Bearer {settings.key}"})
    return [_result(r.get("title"), r.get("url"), r.get("published_date"),
                    text=r.get("raw_content") if q.include_text else None,
                    highlights=[r["content"]] if r.get("content") else None)
            for r in answer.get("results") or ()]


def _domain_ok(url: Any, q: Query) -> bool:
    host = (urlsplit(str(url)).hostname or "").lower()

    def under(domains: list[str]) -> bool:
        return any(host == d.lower() or host.endswith("." + d.lower()) for d in domains)

    return (not q.include_domains or under(q.include_domains)) and not under(q.exclude_domains)


async def _searxng(client: httpx2.AsyncClient, settings: SearchSettings, q: Query
                   ) -> list[dict[str, Any]]:
    params: dict[str, str] = {"q": q.query, "format": "json"}
    if q.category == "news":
        params["categories"] = "news"
    elif q.category == "research paper":
        params["categories"] = "science"
    if q.user_location:
        params["language"] = f"all-{q.user_location.upper()}"
    response = await client.get(f"{settings.url}/search", params=params)
    response.raise_for_status()
    if len(response.content) > MAX_RESPONSE_BYTES:
        raise ValueError(f"the answer was over {MAX_RESPONSE_BYTES} bytes")
    # SearXNG has no domain filters of its own: they are applied to what it found.
    return [_result(r.get("title"), r.get("url"), r.get("publishedDate"),
                    highlights=[r["content"]] if r.get("content") else None)
            for r in response.json().get("results") or () if _domain_ok(r.get("url"), q)]


_SEARCHES = {"exa": _exa, "tavily": _tavily, "searxng": _searxng}
