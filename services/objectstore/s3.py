"""S3 through boto3. Credentials are the AWS chain's (env, profile, instance role);
`AWS_ENDPOINT_URL` is honoured by botocore, and an `endpoint` from the config reaches any
S3-compatible store. Writes carry `If-None-Match: *` (must not exist) or `If-Match: <ETag>`;
a copy names its source's ETag (`x-amz-copy-source-if-match`); a delete carries `If-Match`."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config as BotoConfig
from botocore.exceptions import ClientError

from services.objectstore.store import ABSENT, Bucket, Conflict, Obj

PAGE = 1000


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def _mtime(value: Any) -> int:
    return int(value.timestamp() * 1e9) if value is not None else 0


class S3Bucket(Bucket):
    scheme = "s3"

    def __init__(self, name: str, endpoint: str | None = None, region: str | None = None) -> None:
        super().__init__(name)
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
        self.counted()
        try:
            r = self.client.copy_object(Bucket=self.name, Key=dst, CopySource={"Bucket": self.name, "Key": src.key},
                                        CopySourceIfMatch=src.version, IfNoneMatch="*")
        except ClientError as exc:
            if _status(exc) in (409, 412):
                raise Conflict(dst, f"{dst} exists, or {src.key} changed since it was listed") from None
            if _status(exc) == 404:
                raise FileNotFoundError(src.key) from None
            raise OSError(f"{src.key} -> {dst}: {exc}") from None
        etag = r.get("CopyObjectResult", {}).get("ETag", "")
        return Obj(dst, src.size, 0, etag, etag)  # (the size is the source's: `same` checks the listing's)

    def same(self, src: Obj, copy: Obj) -> bool:
        # a multipart upload's ETag ("…-N") is not its content's MD5, and its server-side copy
        # gets another: the copy named the source's ETag (x-amz-copy-source-if-match), so S3
        # copied exactly that version; the size says it is whole
        if "-" in src.checksum.strip('"'):
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
