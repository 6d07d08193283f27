"""Slack's file upload (the flow `files_upload_v2` takes), for the fake Slack, as strict as Slack's.

    files.getUploadURLExternal(filename, length)   -> upload_url, file_id (needs files:write)
    POST <upload_url>   the bytes (raw, or a multipart `file` part); exactly `length` of them, once
    files.completeUploadExternal(files=[{"id", "title"}], channel_id, initial_comment, thread_ts)
                        -> the shared files; the message (the comment) is posted where channel_id says

    slack.uploads   completed uploads: "file_id", "filename", "title", "data", "channel_id", "thread_ts",
                    "initial_comment", "at"

A completion naming a file never uploaded, uploaded with another length, already completed, or without
`files` JSON, fails with Slack's error codes; a refused channel (refuse_channel) refuses the share too.
"""

from __future__ import annotations

import json
import mimetypes
import time
from typing import Any

from aiohttp import web

UPLOAD_PATH = "/upload/v1/{ticket}"


class SlackUploads:
    """Mixed into FakeSlack: `self.base_url`, `self.scopes`, `self._refused`, `self.next_ts()` and `ApiError`."""

    def _uploads_init(self) -> None:
        self.uploads: list[dict[str, Any]] = []
        self._pending: dict[str, dict[str, Any]] = {}  # file id -> {"filename", "length", "ticket", "data"}
        self._tickets_up: dict[str, str] = {}  # upload ticket -> file id

    def _uploads_routes(self, app: web.Application) -> None:
        app.router.add_post(UPLOAD_PATH, self._upload)

    def _m_files_getUploadURLExternal(self, p: dict[str, Any]) -> dict[str, Any]:
        from tests.fakes.fake_slack import ApiError

        if "files:write" not in self.scopes:
            raise ApiError("missing_scope")
        filename, length = p.get("filename"), p.get("length")
        if not filename:
            raise ApiError("invalid_arguments")
        try:
            size = int(length)
        except (TypeError, ValueError):
            raise ApiError("invalid_arguments") from None
        if size <= 0:
            raise ApiError("invalid_arguments")
        file_id = f"F{len(self._pending) + 1:07d}"
        ticket = f"u{file_id.lower()}x{int(time.monotonic() * 1000)}"
        self._pending[file_id] = {"filename": filename, "length": size, "ticket": ticket, "data": None}
        self._tickets_up[ticket] = file_id
        return {"upload_url": self.base_url + UPLOAD_PATH.format(ticket=ticket), "file_id": file_id}

    async def _upload(self, request: web.Request) -> web.Response:
        file_id = self._tickets_up.pop(request.match_info["ticket"], None)
        if file_id is None:
            return web.Response(status=404, text="upload URL not found or used already")
        if request.content_type == "multipart/form-data":
            reader = await request.multipart()
            part = await reader.next()
            data = await part.read() if part is not None else b""
        else:
            data = await request.read()
        self._pending[file_id]["data"] = data
        return web.Response(text=f"OK - {len(data)}")

    def _m_files_completeUploadExternal(self, p: dict[str, Any]) -> dict[str, Any]:
        from tests.fakes.fake_slack import ApiError

        if "files:write" not in self.scopes:
            raise ApiError("missing_scope")
        try:
            entries = json.loads(p.get("files") or "")
        except ValueError:
            raise ApiError("invalid_arguments") from None
        if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) and e.get("id") for e in entries):
            raise ApiError("invalid_arguments")
        channel = p.get("channel_id")
        if channel in self._refused:
            raise ApiError(self._refused[channel])
        shared = []
        for entry in entries:
            pending = self._pending.get(entry["id"])
            if pending is None or pending["data"] is None:
                raise ApiError("file_not_found")
            if len(pending["data"]) != pending["length"]:
                raise ApiError("file_upload_size_mismatch")
            shared.append((entry, self._pending.pop(entry["id"])))
        files = []
        ts = self.next_ts() if channel else None
        for entry, pending in shared:
            mime = mimetypes.guess_type(pending["filename"])[0] or "application/octet-stream"
            self.uploads.append({"file_id": entry["id"], "filename": pending["filename"],
                                 "title": entry.get("title") or pending["filename"], "data": pending["data"],
                                 "channel_id": channel, "thread_ts": p.get("thread_ts"),
                                 "initial_comment": p.get("initial_comment"), "ts": ts, "at": time.monotonic()})
            files.append({"id": entry["id"], "name": pending["filename"], "title": entry.get("title"),
                          "mimetype": mime, "size": len(pending["data"]), "filetype": mime.split("/")[-1]})
        return {"files": files}
