"""Download canonical dataset files with SHA-256 verification, resume and a lock on the cache.

A file is fetched into ``<name>.part`` (resumed with an HTTP ``Range`` request when a previous
attempt left one, restarted when the server ignores the range), verified, and only then moved
into place with ``os.replace``: a reader never sees a half-written file. A ``filelock`` per file
makes concurrent processes take turns, and the second finds the file already there. A checksum
mismatch deletes the partial file and raises :class:`~advisor.errors.ChecksumError`.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import json
import logging
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Collection

from advisor.errors import ChecksumError, DatasetError
from advisor._datasets.cache import cache_root, lookup_digests, sha256_file, store_digests

__all__ = ["Progress", "RemoteFile", "SOURCES", "CIFAR_MEMBERS", "VERIFIED_MARKER", "download_file",
           "download_dataset", "dataset_cache_folder"]

_log = logging.getLogger(__name__)
Progress = Callable[[str, int, "int | None"], None]  # (file name, bytes done, total bytes or None)
_CHUNK = 1 << 20
_LOCK_TIMEOUT_S = 3600.0
VERIFIED_MARKER = ".advisor-verified.json"
CIFAR_MEMBERS = tuple(f"data_batch_{i}.bin" for i in range(1, 6)) + ("test_batch.bin", "batches.meta.txt")
_CIFAR_MEMBER_MAX = 31_000_000


@dataclass(frozen=True)
class RemoteFile:
    """One canonical file: where it comes from and the digests accepted for it.

    Attributes:
        name: File name in the cache folder (also the last part of each URL).
        urls: The canonical URL first, then known mirrors.
        sha256: Accepted SHA-256 digests of the file as served.
        content_sha256: Accepted SHA-256 digests of its gunzipped content (the IDX ``.gz`` files
            exist re-compressed, by MNIST's mirrors and Debian's ``dataset-fashion-mnist``: they
            hash differently but hold the same bytes).
    """

    name: str
    urls: tuple[str, ...]
    sha256: frozenset[str]
    content_sha256: frozenset[str] = frozenset()


def _idx_files(bases: tuple[str, ...], digests: dict[str, tuple[str, str]]) -> tuple[RemoteFile, ...]:
    """The four IDX files of an MNIST-format dataset: ``{name: (.gz sha256, content sha256)}``."""
    return tuple(
        RemoteFile(name, tuple(base + name for base in bases), frozenset([gz]), frozenset([content]))
        for name, (gz, content) in digests.items()
    )


SOURCES: dict[str, tuple[RemoteFile, ...]] = {
    "mnist": _idx_files(
        ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/"),
        {
            "train-images-idx3-ubyte.gz": ("440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
                                           "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db"),
            "train-labels-idx1-ubyte.gz": ("3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
                                           "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5"),
            "t10k-images-idx3-ubyte.gz": ("8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
                                          "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7"),
            "t10k-labels-idx1-ubyte.gz": ("f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
                                          "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"),
        },
    ),
    # Zalando's own address: an S3 website endpoint, which serves http only (the digests, not the
    # transport, vouch for the files). The .gz digests are of the official downloads (their MD5s
    # are the published ones); the content digests also accept Debian's re-gzipped copies.
    "fashion-mnist": _idx_files(
        ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",),
        {
            "train-images-idx3-ubyte.gz": ("3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
                                           "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"),
            "train-labels-idx1-ubyte.gz": ("a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
                                           "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"),
            "t10k-images-idx3-ubyte.gz": ("346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
                                          "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"),
            "t10k-labels-idx1-ubyte.gz": ("67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
                                          "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"),
        },
    ),
    "cifar10": (
        RemoteFile("cifar-10-binary.tar.gz", ("https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz",),
                   frozenset(["c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd"])),
    ),
}


def dataset_cache_folder(name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder that holds ``name``'s canonical files in the cache."""
    folder = cache_root(cache_dir) / name
    return folder / "cifar-10-batches-bin" if name == "cifar10" else folder


def _gunzip_sha256(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with gzip.open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(_CHUNK), b""):
                digest.update(chunk)
    except (OSError, EOFError):
        return None
    return digest.hexdigest()


def _matches(path: Path, sha256: Collection[str], content_sha256: Collection[str]) -> tuple[bool, str]:
    """Whether ``path`` has an accepted digest; returns the file's own SHA-256 for messages."""
    actual = lookup_digests(path).get("sha256") or sha256_file(path)
    if actual in sha256:
        store_digests(path, {"sha256": actual})
        return True, actual
    if content_sha256:
        content = _gunzip_sha256(path)
        if content is not None and content in content_sha256:
            store_digests(path, {"sha256": actual, "content_sha256": content})
            return True, actual
    return False, actual


def _open(url: str, start: int, timeout: float) -> http.client.HTTPResponse:
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in ("http", "https", "file"):
        raise DatasetError(f"The URL {url!r} must use http, https or file; fix the mirror address.")
    from advisor import __version__

    request = urllib.request.Request(url, headers={"User-Agent": f"advisor/{__version__}"})
    if start:
        request.add_header("Range", f"bytes={start}-")
    return urllib.request.urlopen(request, timeout=timeout)  # type: ignore[no-any-return]


def _fetch(url: str, part: Path, progress: Progress | None, timeout: float) -> bool:
    """Fetch ``url`` into ``part``, resuming what is there; returns whether it resumed."""
    start = part.stat().st_size if part.exists() else 0
    try:
        response = _open(url, start, timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and start:  # the partial file is not a prefix the server knows: restart
            part.unlink()
            return _fetch(url, part, progress, timeout)
        raise DatasetError(f"Download of {url} failed: HTTP {exc.code} {exc.reason}; retry later, "
                           "use --mirror, or point --data-dir at files you already have.") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DatasetError(f"Download of {url} failed: {reason}; check the network, use --mirror, or point "
                           "--data-dir at files you already have.") from None
    with response:
        resumed = bool(start) and getattr(response, "status", 200) == 206
        if start and not resumed:
            _log.info("%s ignored the range request; restarting the download", url)
            start = 0
        length = response.headers.get("Content-Length")
        total = start + int(length) if length and length.isdigit() else None
        done = start
        name = part.name[: -len(".part")]
        try:
            with open(part, "ab" if resumed else "wb") as fh:
                while chunk := response.read(_CHUNK):
                    fh.write(chunk)
                    done += len(chunk)
                    if progress is not None:
                        progress(name, done, total)
                fh.flush()
                os.fsync(fh.fileno())
        except (OSError, http.client.HTTPException) as exc:
            raise DatasetError(f"Download of {url} was interrupted after {done:,} bytes ({exc}); run it "
                               "again to resume.") from None
    if total is not None and done < total:
        raise DatasetError(f"Download of {url} was interrupted after {done:,} of {total:,} bytes; run it "
                           "again to resume.")
    return resumed


def download_file(url: str, dest: str | os.PathLike[str], *, sha256: Collection[str],
                  content_sha256: Collection[str] = (), progress: Progress | None = None,
                  timeout: float = 60.0) -> Path:
    """Download ``url`` to ``dest`` unless a verified copy is already there.

    Args:
        url: An http, https or file URL.
        dest: Final path; ``dest.part`` and ``dest.lock`` live beside it.
        sha256: Accepted SHA-256 digests of the file.
        content_sha256: Accepted digests of its gunzipped content (either kind of match passes).
        progress: Called with ``(file name, bytes done, total or None)`` as data arrives.
        timeout: Socket timeout in seconds.

    Returns:
        ``dest``, verified.

    Raises:
        ChecksumError: When the downloaded file has none of the accepted digests (it is deleted).
        DatasetError: When the download fails; an interrupted one is resumed by the next call.
    """
    from filelock import FileLock

    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    with FileLock(str(dest) + ".lock", timeout=_LOCK_TIMEOUT_S):
        if dest.exists():
            if _matches(dest, sha256, content_sha256)[0]:
                return dest
            _log.warning("%s does not match its checksum; downloading it again", dest)
            dest.unlink()
        while True:
            resumed = _fetch(url, part, progress, timeout)
            ok, actual = _matches(part, sha256, content_sha256)
            if ok:
                os.replace(part, dest)
                store_digests(dest, {"sha256": actual})
                return dest
            part.unlink()
            if not resumed:  # a bad resumed prefix gets one fresh attempt; a fresh mismatch is final
                expected = " or ".join(sorted(sha256))
                if content_sha256:
                    expected += " (or gunzipped " + " or ".join(sorted(content_sha256)) + ")"
                raise ChecksumError(f"Checksum mismatch for {url}: expected sha256 {expected}, got {actual}; "
                                    "the partial file was deleted, so retry, or check the mirror.")


def _extract_cifar(archive: Path, folder: Path, archive_sha256: str) -> None:
    """Extract the binary batches safely (known names, regular files, bounded sizes)."""
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".extract-"))
    digests = {}
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                base = member.name.split("/")[-1]
                if not member.isfile() or base not in CIFAR_MEMBERS or member.size > _CIFAR_MEMBER_MAX:
                    continue
                source = tar.extractfile(member)
                if source is None:
                    continue
                with source, open(tmp / base, "wb") as out:
                    shutil.copyfileobj(source, out, _CHUNK)
                digests[base] = sha256_file(tmp / base)
        (tmp / VERIFIED_MARKER).write_text(json.dumps(
            {"archive": archive.name, "archive_sha256": archive_sha256, "files": digests}, indent=1, sort_keys=True))
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise DatasetError(f"{archive}: cannot be extracted ({exc}); delete it and download again.") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def download_dataset(name: str, *, cache_dir: str | os.PathLike[str] | None = None, mirror: str | None = None,
                     progress: Progress | None = None) -> Path | None:
    """Make ``name``'s canonical files present and verified in the cache.

    Args:
        name: A registry name (``mnist``, ``fashion-mnist``, ``cifar10``); ``digits`` and
            ``synthetic:...`` need nothing and return ``None``.
        cache_dir: Cache root; default ``$ADVISOR_DATA`` or the user cache directory.
        mirror: Base URL of a mirror holding the same file names (tried instead of the canonical URLs).
        progress: Download progress callback.

    Returns:
        The folder that holds the files, or ``None`` when there is nothing to download.

    Raises:
        ChecksumError: When a file does not match its published digest.
        DatasetError: When every URL fails.
    """
    from filelock import FileLock

    from advisor._datasets.registry import canonical_name

    key = canonical_name(name)
    if key not in SOURCES:
        return None
    folder = dataset_cache_folder(key, cache_dir)
    root = folder.parent if key == "cifar10" else folder
    root.mkdir(parents=True, exist_ok=True)
    if key != "cifar10":
        for remote in SOURCES[key]:
            _download_remote(remote, root, mirror, progress)
        return folder
    # One lock over download and extraction, so a second process finds the batches ready.
    with FileLock(str(root / ".extract.lock"), timeout=_LOCK_TIMEOUT_S):
        if not (folder / VERIFIED_MARKER).exists():
            (remote,) = SOURCES[key]
            archive = _download_remote(remote, root, mirror, progress)
            _extract_cifar(archive, folder, lookup_digests(archive).get("sha256", ""))
            archive.unlink(missing_ok=True)  # the verified batches and their digests are what we keep
    return folder


def _download_remote(remote: RemoteFile, root: Path, mirror: str | None, progress: Progress | None) -> Path:
    urls = (mirror.rstrip("/") + "/" + remote.name,) if mirror else remote.urls
    errors = []
    for url in urls:
        try:
            return download_file(url, root / remote.name, sha256=remote.sha256,
                                 content_sha256=remote.content_sha256, progress=progress)
        except ChecksumError:
            raise
        except DatasetError as exc:
            errors.append(str(exc))
    if len(errors) == 1:
        raise DatasetError(errors[0])
    raise DatasetError(f"Every URL for {remote.name} failed: " + " | ".join(errors))
