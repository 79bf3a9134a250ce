"""The web page: ``/`` is a one-page app over the REST API, its modules and stylesheet are
under ``/ui/``. The files ship in the package (``static/``); nothing is fetched elsewhere.

The page itself holds no data, so these paths are open (see ``middleware.OPEN_PATHS``); every
call it makes goes through the API with the password the page asks for."""

from __future__ import annotations

import re
from importlib import resources

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response

router = APIRouter(include_in_schema=False)

STATIC = resources.files(__package__) / "static"
_TYPES = {"js": "text/javascript", "css": "text/css", "html": "text/html"}
_NAME = re.compile(r"^[a-z_]+\.(js|css)$")  # the only names served: no paths, no dotfiles
# The page and its modules change with the package: the browser asks again each time. No
# other site may frame the page (clickjacking), and it loads and calls nothing but this
# server (its bars are sized by style attributes).
_HEADERS = {
    "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                               "frame-ancestors 'none'; base-uri 'none'",
}


def _file(name: str) -> Response:
    item = STATIC / name
    if not item.is_file():
        raise HTTPException(404, detail=f"no file {name!r}")
    kind = name.rsplit(".", 1)[1]
    return Response(item.read_bytes(), media_type=f"{_TYPES[kind]}; charset=utf-8",
                    headers=_HEADERS)


@router.get("/")
async def page() -> Response:
    return _file("index.html")


@router.get("/ui/{name}")
async def asset(name: str) -> Response:
    if not _NAME.match(name):
        raise HTTPException(404, detail=f"no file {name!r}")
    return _file(name)
