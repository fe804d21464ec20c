"""POST /v1/documents (upload into the caller's uploads folder) and GET /v1/documents/{upload_id} (status)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request
from starlette.datastructures import UploadFile as StarletteUpload

from ragloom.service import intake
from ragloom.service.auth import CallerDep
from ragloom.service.models import UploadResponse

router = APIRouter(prefix="/v1/documents", tags=["documents"])


@router.post("", response_model=UploadResponse, status_code=202,
             summary="Upload a file: multipart form field `file` (curl -F file=@notes.md), or the raw request body "
                     "with `?filename=`; the uploads sensor indexes it",
             openapi_extra={"requestBody": {"required": True, "content": {
                 "multipart/form-data": {"schema": {"type": "object", "required": ["file"], "properties": {
                     "file": {"type": "string", "format": "binary"}}}},
                 "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}})
async def upload(request: Request, who: CallerDep,
                 filename: Annotated[str | None, Query(max_length=200, description="e.g. notes.md; a multipart "
                                                       "upload defaults to the part's own file name")] = None,
                 scope: Annotated[str | None, Query(description="inside the key's scope; default its own")] = None,
                 title: Annotated[str, Query(max_length=200)] = "",
                 namespace: Annotated[str, Query(max_length=64)] = "") -> UploadResponse:
    target = who.narrow(scope)
    filename, data = await _read_file(request, filename)
    settings = request.app.state.settings
    record = await request.app.state.rag.run_blocking(
        intake.save_upload, settings.resolved_uploads_dir, target, filename, data, title=title, namespace=namespace)
    return UploadResponse(upload_id=record.upload_id, document_id=record.document_id, scope=record.scope,
                          status="queued")


async def _read_file(request: Request, filename: str | None) -> tuple[str, bytes]:
    """The uploaded file's name and bytes, from a multipart form's ``file`` part or from the raw body."""
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        form = await request.form(max_files=1, max_fields=0)
        try:  # closed on every path: a refused form's spooled parts would hold temporary files open
            part = form.get("file")
            if not isinstance(part, StarletteUpload):
                raise HTTPException(400, "a multipart upload needs its file in a form field named 'file'")
            data, filename = await part.read(), filename or part.filename
        finally:
            await form.close()
    else:
        data = await request.body()
    if not filename:
        raise HTTPException(400, "name the file: ?filename=notes.md (or send a multipart part with a file name)")
    if len(filename) > 200:
        raise HTTPException(400, "the file name is over 200 characters")
    if not data:
        raise HTTPException(400, "the uploaded file is empty")
    return filename, data


@router.get("/{upload_id}", response_model=UploadResponse, summary="queued, indexed, or rejected with the reason")
async def status(upload_id: str, request: Request, who: CallerDep) -> UploadResponse:
    state = request.app.state
    settings = state.settings
    record = intake.load_record(settings.resolved_uploads_dir, upload_id)
    if record is None or not who.owns(record.scope):
        raise HTTPException(404, f"no upload {upload_id!r} in this key's scope")

    def check() -> tuple[str, str | None]:
        reason = intake.rejection(settings.artifacts_dir, record.path)
        if reason:
            return "rejected", reason
        indexed = state.rag.is_indexed(settings.chunkings[0], record.document_id)
        return ("indexed", None) if indexed else ("queued", None)

    status_, reason = await state.rag.run_blocking(check)
    return UploadResponse(upload_id=record.upload_id, document_id=record.document_id, scope=record.scope,
                          status=status_, reason=reason)
