"""The MCP server (the SDK's low-level `Server`): tools from tools.py, resources for collections and
documents. Transport-free: `caller_of` says who calls (http.py: the request's key; stdio: the key
given at start).

Every failure of a tool is an MCP tool error (`isError`, one line `code: message`), never an
internal error: unknown tool, arguments that break the schema (pydantic's message, field by
field), the REST errors (404 for another tenant's objects, 403 for a missing scope, 429 with
its wait). Resources fail with JSON-RPC errors, as the protocol has no error result for them.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from functools import cache

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from pydantic import ValidationError
from sqlalchemy import func, select

from api.document_text import parsed_text
from api.errors import classify
from api.mcp.tools import READ_MAX_CHARS, TOOLS, Caller
from api.scoping import get_in_tenant
from core.errors import ClientError
from core.models import Collection, Document
from core.tenancy import scope_to_tenant
from usecases.lookups import get_collection

RESOURCE_PAGE = 100
RESOURCE_NOT_FOUND = -32002  # the MCP spec's code for an unknown resource
_URI = re.compile(r"groundwork://(collections|documents)/([^/?#]{1,200})")

CallerOf = Callable[[ServerRequestContext], Caller]


@cache
def tool_list() -> list[types.Tool]:
    """Built once: the schemas are static, and pydantic takes ~5 ms to generate them all, which the
    SDK would otherwise spend on every tools/call of the 2026-07-28 protocol (it looks up the
    called tool's schema to check `Mcp-Param-*` headers; see `input_schema`)."""
    return [
        types.Tool(
            name=t.name,
            description=t.description,
            input_schema=t.args.model_json_schema(),
            annotations=types.ToolAnnotations(read_only_hint=t.read_only, open_world_hint=False),
        )
        for t in TOOLS.values()
    ]


def input_schema(name: str) -> dict | None:
    """A tool's input schema by name, for the SDK's per-call header check (without this it lists
    every tool on each call)."""
    return next((t.input_schema for t in tool_list() if t.name == name), None)


def _tool_error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _error_line(err: ClientError) -> str:
    wait = (err.headers or {}).get("Retry-After")
    return f"{err.code}: {err.message}" + (f" (retry after {wait} s)" if wait else "")


def _invalid(exc: ValidationError) -> str:
    problems = [f"{'.'.join(map(str, e['loc'])) or '(arguments)'}: {e['msg']}" for e in exc.errors()]
    return "invalid_arguments: " + "; ".join(problems)


def build_server(caller_of: CallerOf) -> Server:
    async def list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None):
        return types.ListToolsResult(tools=tool_list())

    async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams):
        tool = TOOLS.get(params.name)
        if tool is None:
            return _tool_error(f"unknown_tool: no tool {params.name!r}; tools: {', '.join(TOOLS)}")
        try:
            args = tool.args.model_validate(params.arguments or {})
        except ValidationError as exc:
            return _tool_error(_invalid(exc))
        try:
            result = await tool.run(caller_of(ctx), args)
        except ValidationError as exc:  # a use case's own model refused a combination of arguments
            return _tool_error(_invalid(exc))
        except Exception as exc:
            return _tool_error(_error_line(classify(exc)))
        text = json.dumps(result, ensure_ascii=False, default=str)
        return types.CallToolResult(
            content=[types.TextContent(text=text)], structured_content=json.loads(text)
        )

    async def list_resources(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None):
        try:
            caller = caller_of(ctx)
            tenant = caller.tenant("read")
            offset = int(params.cursor) if params and params.cursor else 0
        except (ClientError, ValueError) as exc:
            return _rpc_error(exc)
        with caller.state.sessions() as session:
            scope_to_tenant(session, tenant)
            total = session.scalar(select(func.count()).where(Collection.tenant_id == tenant))
            rows = session.scalars(
                select(Collection)
                .where(Collection.tenant_id == tenant)
                .order_by(Collection.name)
                .limit(RESOURCE_PAGE)
                .offset(offset)
            ).all()
        resources = [
            types.Resource(
                uri=f"groundwork://collections/{c.id}",
                name=c.name,
                description=c.description or None,
                mime_type="application/json",
            )
            for c in rows
        ]
        more = offset + len(rows) < total
        return types.ListResourcesResult(
            resources=resources, next_cursor=str(offset + len(rows)) if more else None
        )

    async def list_templates(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None):
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template="groundwork://collections/{collection}",
                    name="collection",
                    description="A collection (id or name) and its first 100 documents.",
                    mime_type="application/json",
                ),
                types.ResourceTemplate(
                    uri_template="groundwork://documents/{document_id}",
                    name="document",
                    description=f"A document's parsed text (its first {READ_MAX_CHARS} characters; "
                    "read_document reads any span).",
                    mime_type="text/plain",
                ),
            ]
        )

    async def read_resource(ctx: ServerRequestContext, params: types.ReadResourceRequestParams):
        match = _URI.fullmatch(params.uri)
        if match is None:
            return types.ErrorData(code=RESOURCE_NOT_FOUND, message=f"no resource {params.uri!r}")
        try:
            caller = caller_of(ctx)
            tenant = caller.tenant("read")
            with caller.state.sessions() as session:
                scope_to_tenant(session, tenant)
                kind, ref = match.groups()
                text, mime = (
                    _collection_json(session, tenant, ref)
                    if kind == "collections"
                    else (_document_text(session, tenant, ref), "text/plain")
                )
        except (ClientError, ValueError) as exc:
            return _rpc_error(exc)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=params.uri, mime_type=mime, text=text)]
        )

    return Server(
        "groundwork",
        version="0.1.0",
        instructions="Search, ask and read the tenant's document collections; start agent runs.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        get_tool_input_schema=input_schema,
    )


def _rpc_error(exc: Exception) -> types.ErrorData:
    if isinstance(exc, ClientError):
        code = RESOURCE_NOT_FOUND if exc.status == 404 else types.INVALID_PARAMS
        return types.ErrorData(code=code, message=_error_line(exc))
    return types.ErrorData(code=types.INVALID_PARAMS, message=f"invalid_params: {exc}")


def _collection_json(session, tenant: uuid.UUID, ref: str) -> tuple[str, str]:
    collection = get_collection(session, tenant, ref)
    docs = session.scalars(
        select(Document).where(Document.collection_id == collection.id).order_by(Document.title).limit(100)
    ).all()
    body = {
        "id": str(collection.id),
        "name": collection.name,
        "description": collection.description,
        "documents": [
            {"id": str(d.id), "title": d.title, "source_id": d.source_id, "status": str(d.status.value)}
            for d in docs
        ],
    }
    return json.dumps(body, ensure_ascii=False), "application/json"


def _document_text(session, tenant: uuid.UUID, ref: str) -> str:
    document = get_in_tenant(session, tenant, Document, uuid.UUID(ref), "document", "document_not_found")
    return parsed_text(session, document.id).text[:READ_MAX_CHARS]
