"""S3 through boto3. Credentials are the AWS chain's (env, profile, instance role);
`AWS_ENDPOINT_URL` is honoured by botocore, and an `endpoint` from the config reaches any
S3-compatible store. Writes carry `If-None-Match: *` (must not exist) or `If-Match: <ETag>`;
a copy names its source's ETag (`x-amz-copy-source-if-match`); a delete carries `If-Match`.

One CopyObject copies at most 5 GiB: a larger object is copied in parts (UploadPartCopy, each
naming the source's ETag, then CompleteMultipartUpload with `If-None-Match: *`), with the same
preconditions as the single copy."""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
from botocore.config import Config as BotoConfig
from botocore.exceptions import ClientError

from services.objectstore.store import ABSENT, Bucket, Conflict, Obj

PAGE = 1000
COPY_MAX = 5 << 30  # the largest object one CopyObject copies
PART = 512 << 20  # a part of a larger object's copy
PART_MIN = 5 << 20  # S3's smallest part (but the last)
PARTS_MAX = 10_000
PART_THREADS = 8
_KEPT = ("ContentType", "ContentEncoding", "ContentDisposition", "ContentLanguage", "CacheControl", "Metadata")


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def _copy_error(exc: ClientError, src: Obj, dst: str) -> OSError:
    if _status(exc) in (409, 412):
        return Conflict(dst, f"{dst} exists, or {src.key} changed since it was listed")
    if _status(exc) == 404:
        return FileNotFoundError(src.key)
    return OSError(f"{src.key} -> {dst}: {exc}")


def _mtime(value: Any) -> int:
    return int(value.timestamp() * 1e9) if value is not None else 0


class S3Bucket(Bucket):
    scheme = "s3"

    def __init__(self, name: str, endpoint: str | None = None, region: str | None = None, *,
                 copy_max: int = COPY_MAX, part_size: int = PART) -> None:
        """`copy_max`: objects larger than this are copied in parts of `part_size` (at least 5 MiB,
        and large enough for 10,000 parts)."""
        super().__init__(name)
        self.copy_max, self.part_size = copy_max, part_size
        self.client = boto3.client("s3", endpoint_url=endpoint, region_name=region,
                                   config=BotoConfig(retries={"mode": "standard"}, max_pool_connections=32))

    def objects(self, prefix: str) -> list[Obj]:
        out: list[Obj] = []
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(
                    Bucket=self.name, Prefix=prefix, PaginationConfig={"PageSize": PAGE}):
                self.counted()
                out += [Obj(o["Key"], int(o["Size"]), _mtime(o.get("LastModified")), o["ETag"], o["ETag"])
                        for o in page.get("Contents", ())]
        except ClientError as exc:
            if _code(exc) == "NoSuchBucket":
                raise FileNotFoundError(f"s3://{self.name}: no such bucket") from None
            raise OSError(f"s3://{self.name}/{prefix}: {exc}") from None
        return out

    def list_first(self, prefix: str, n: int) -> list[Obj]:
        self.counted()
        try:
            r = self.client.list_objects_v2(Bucket=self.name, Prefix=prefix, MaxKeys=n)
        except ClientError as exc:
            if _code(exc) == "NoSuchBucket":
                raise FileNotFoundError(f"s3://{self.name}: no such bucket") from None
            raise OSError(f"s3://{self.name}/{prefix}: {exc}") from None
        return [Obj(o["Key"], int(o["Size"]), _mtime(o.get("LastModified")), o["ETag"], o["ETag"])
                for o in r.get("Contents", ())]

    def head(self, key: str) -> Obj | None:
        self.counted()
        try:
            r = self.client.head_object(Bucket=self.name, Key=key)
        except ClientError as exc:
            if _status(exc) == 404:
                return None
            raise OSError(f"{key}: {exc}") from None
        return Obj(key, int(r["ContentLength"]), _mtime(r.get("LastModified")), r["ETag"], r["ETag"])

    def get(self, key: str, max_bytes: int) -> tuple[bytes, Obj] | None:
        self.counted()
        try:
            r = self.client.get_object(Bucket=self.name, Key=key, Range=f"bytes=0-{max_bytes}")
        except ClientError as exc:
            if _status(exc) == 404:
                return None
            if _status(exc) == 416:  # an empty object has no byte 0
                obj = self.head(key)
                return None if obj is None else (b"", obj)
            raise OSError(f"{key}: {exc}") from None
        data = r["Body"].read()
        if len(data) > max_bytes:
            raise OSError(f"{key}: larger than {max_bytes:,} bytes")
        size = int(str(r.get("ContentRange", "")).rpartition("/")[2] or r["ContentLength"])
        return data, Obj(key, size, _mtime(r.get("LastModified")), r["ETag"], r["ETag"])

    def put(self, key: str, data: bytes, match: str | None) -> Obj:
        self.counted()
        cond = {} if match is None else {"IfNoneMatch": "*"} if match == ABSENT else {"IfMatch": match}
        try:
            r = self.client.put_object(Bucket=self.name, Key=key, Body=data, **cond)
        except ClientError as exc:
            # (If-Match on an object that is gone answers 404)
            if _status(exc) in (409, 412) or (_status(exc) == 404 and match):
                raise Conflict(key, "it exists" if match == ABSENT else "it changed since it was read") from None
            raise OSError(f"{key}: {exc}") from None
        return Obj(key, len(data), 0, r["ETag"], r["ETag"])

    def copy(self, src: Obj, dst: str) -> Obj:
        if src.size > self.copy_max:
            return self._copy_parts(src, dst)
        self.counted()
        try:
            r = self.client.copy_object(Bucket=self.name, Key=dst, CopySource={"Bucket": self.name, "Key": src.key},
                                        CopySourceIfMatch=src.version, IfNoneMatch="*")
        except ClientError as exc:
            raise _copy_error(exc, src, dst) from None
        etag = r.get("CopyObjectResult", {}).get("ETag", "")
        return Obj(dst, src.size, 0, etag, etag)  # (the size is the source's: `same` checks the listing's)

    def _copy_parts(self, src: Obj, dst: str) -> Obj:
        size = max(self.part_size, PART_MIN, -(-src.size // PARTS_MAX))
        ranges = [(a, min(a + size, src.size) - 1) for a in range(0, src.size, size)]
        self._abort_uploads(dst)
        self.counted(2)
        try:
            # what CopyObject would carry over: the source's content headers and metadata
            head = self.client.head_object(Bucket=self.name, Key=src.key, IfMatch=src.version)
            keep = {k: head[k] for k in _KEPT if head.get(k)}
            upload = self.client.create_multipart_upload(Bucket=self.name, Key=dst, **keep)["UploadId"]
        except ClientError as exc:
            raise _copy_error(exc, src, dst) from None

        def part(n: int, first: int, last: int) -> dict[str, Any]:
            self.counted()
            r = self.client.upload_part_copy(Bucket=self.name, Key=dst, UploadId=upload, PartNumber=n,
                                             CopySource={"Bucket": self.name, "Key": src.key},
                                             CopySourceRange=f"bytes={first}-{last}", CopySourceIfMatch=src.version)
            return {"ETag": r["CopyPartResult"]["ETag"], "PartNumber": n}

        try:
            with ThreadPoolExecutor(min(PART_THREADS, len(ranges))) as pool:
                parts = list(pool.map(part, range(1, len(ranges) + 1), *zip(*ranges, strict=True)))
            self.counted()
            r = self.client.complete_multipart_upload(Bucket=self.name, Key=dst, UploadId=upload,
                                                      MultipartUpload={"Parts": parts}, IfNoneMatch="*")
        except BaseException as exc:
            self.counted()
            with contextlib.suppress(ClientError):  # (else the bucket's lifecycle rule, if any, ends it)
                self.client.abort_multipart_upload(Bucket=self.name, Key=dst, UploadId=upload)
            if isinstance(exc, ClientError):
                raise _copy_error(exc, src, dst) from None
            raise
        return Obj(dst, src.size, 0, r["ETag"], r["ETag"])

    def _abort_uploads(self, key: str) -> None:
        """Parts of a copy to `key` that a kill left unfinished: the destination of a move is
        evaldesk's own (its incoming marker was written first), so they are its own too."""
        self.counted()
        try:
            r = self.client.list_multipart_uploads(Bucket=self.name, Prefix=key)
        except ClientError:
            return
        for u in r.get("Uploads", ()):
            if u.get("Key") == key:
                self.counted()
                with contextlib.suppress(ClientError):
                    self.client.abort_multipart_upload(Bucket=self.name, Key=key, UploadId=u["UploadId"])

    def same(self, src: Obj, copy: Obj) -> bool:
        # a multipart object's ETag ("…-N") is not its content's MD5, and its copy gets another
        # (as does a copy made in parts): the copy named the source's ETag
        # (x-amz-copy-source-if-match), so S3 copied exactly that version; the size says it is whole
        if "-" in src.checksum.strip('"') or "-" in copy.checksum.strip('"'):
            return copy.size == src.size
        return copy.size == src.size and copy.checksum == src.checksum

    def delete(self, obj: Obj) -> None:
        self.counted()
        try:
            self.client.delete_object(Bucket=self.name, Key=obj.key, IfMatch=obj.version)
        except ClientError as exc:
            if _status(exc) == 412:
                raise Conflict(obj.key) from None
            if _status(exc) == 404:
                raise FileNotFoundError(obj.key) from None
            raise OSError(f"{obj.key}: {exc}") from None
