"""GCS through google-cloud-storage (JSON API over HTTP). Credentials are the library's own
(Application Default Credentials); `STORAGE_EMULATOR_HOST` is honoured by the library, and an
`endpoint` from the config reaches any GCS-compatible store. Every write carries
`ifGenerationMatch`: 0 when the object must not exist, else the generation it replaces; a
copy is a rewrite (as many calls as the service asks for), so no object is too large to move."""

from __future__ import annotations

import os
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import storage

from services.objectstore.store import ABSENT, Bucket, Conflict, Obj

PAGE = 1000  # the JSON API's largest page


def _obj(blob: Any) -> Obj:
    updated = blob.updated
    mtime_ns = int(updated.timestamp() * 1e9) if updated is not None else 0
    return Obj(blob.name, int(blob.size or 0), mtime_ns, str(blob.generation or ""),
               f"crc32c:{blob.crc32c}:{blob.size}")


def client(endpoint: str | None = None, project: str | None = None) -> storage.Client:
    options = {"api_endpoint": endpoint} if endpoint else None
    if endpoint or os.environ.get("STORAGE_EMULATOR_HOST"):
        from google.auth.credentials import AnonymousCredentials

        try:
            import google.auth

            creds, found = google.auth.default()
            project = project or found
        except Exception:  # no ADC: a local or self-hosted store that needs none
            creds = AnonymousCredentials()
        return storage.Client(project=project or "evaldesk", credentials=creds, client_options=options)
    return storage.Client(project=project)


class GCSBucket(Bucket):
    scheme = "gs"

    def __init__(self, name: str, endpoint: str | None = None, project: str | None = None) -> None:
        super().__init__(name)
        self.client = client(endpoint, project)
        self.bucket = self.client.bucket(name)

    def objects(self, prefix: str) -> list[Obj]:
        out: list[Obj] = []
        pages = self.client.list_blobs(self.name, prefix=prefix, page_size=PAGE,
                                       fields="items(name,size,updated,generation,crc32c),nextPageToken").pages
        try:
            for page in pages:
                self.counted()
                out += [_obj(b) for b in page]
        except gexc.NotFound:
            raise FileNotFoundError(f"gs://{self.name}: no such bucket") from None
        return out

    def list_first(self, prefix: str, n: int) -> list[Obj]:
        self.counted()
        try:
            return [_obj(b) for b in self.client.list_blobs(self.name, prefix=prefix, max_results=n, page_size=n)]
        except gexc.NotFound:
            raise FileNotFoundError(f"gs://{self.name}: no such bucket") from None

    def head(self, key: str) -> Obj | None:
        self.counted()
        blob = self.bucket.get_blob(key)
        return None if blob is None else _obj(blob)

    def get(self, key: str, max_bytes: int) -> tuple[bytes, Obj] | None:
        self.counted()
        blob = self.bucket.blob(key)
        try:
            # one request: the bytes (at most one over the cap) and the generation they are of
            data = blob.download_as_bytes(end=max_bytes, checksum=None)
        except gexc.NotFound:
            return None
        except gexc.RequestRangeNotSatisfiable:
            data = b""
        if len(data) > max_bytes:
            raise OSError(f"{key}: larger than {max_bytes:,} bytes")
        if blob.generation is None:  # (an empty object's download says no generation)
            obj = self.head(key)
            return None if obj is None else (data, obj)
        obj = _obj(blob)
        return data, Obj(obj.key, len(data), obj.mtime_ns, obj.version, obj.checksum)

    def put(self, key: str, data: bytes, match: str | None) -> Obj:
        self.counted()
        blob = self.bucket.blob(key)
        cond = {} if match is None else {"if_generation_match": 0 if match == ABSENT else int(match)}
        try:
            blob.upload_from_string(data, content_type="application/octet-stream", **cond)
        except gexc.PreconditionFailed:
            raise Conflict(key, "it exists" if match == ABSENT else "it changed since it was read") from None
        return _obj(blob)

    def copy(self, src: Obj, dst: str) -> Obj:
        # a rewrite, not objects.copy: the service may answer a large object (or one in another
        # storage class) in several calls, each returning a token for the next; every call
        # carries the same preconditions
        blob, source = self.bucket.blob(dst), self.bucket.blob(src.key)
        token: str | None = None
        try:
            while True:
                self.counted()
                token, _, _ = blob.rewrite(source, token=token, if_generation_match=0,
                                           if_source_generation_match=int(src.version))
                if token is None:
                    break
        except gexc.PreconditionFailed:
            raise Conflict(dst, f"{dst} exists, or {src.key} changed since it was listed") from None
        except gexc.NotFound:
            raise FileNotFoundError(src.key) from None
        return _obj(blob)

    def delete(self, obj: Obj) -> None:
        self.counted()
        try:
            self.bucket.delete_blob(obj.key, if_generation_match=int(obj.version))
        except gexc.PreconditionFailed:
            raise Conflict(obj.key) from None
        except gexc.NotFound:
            raise FileNotFoundError(obj.key) from None
