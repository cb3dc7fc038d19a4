"""Real documents nobody here wrote: Debian's FAQ (the Debian package debian-faq: a 73-page PDF, its HTML
pages and its plain-text rendering) and the sample Word files and README of python-docx's source
distribution (fetched once from the package index with a pinned checksum)."""

from __future__ import annotations

import gzip
import hashlib
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

FAQ = Path("/usr/share/doc/debian/FAQ")
DOCX_SDIST = "python_docx-1.2.0.tar.gz"
DOCX_SHA256 = "7bc9d7b7d8a69c9c02ca09216118c86552704edc23bac179283f2e38f86220ce"
CACHE = Path.home() / ".cache" / "metakg" / "test-data"


def _missing(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message)  # in CI a missing input is an error, never a silent skip
    pytest.skip(message)


@pytest.fixture(scope="session")
def debian_faq() -> Path:
    """The Debian FAQ's folder (HTML pages, gzipped PDF and text)."""
    if not (FAQ / "debian-faq.en.pdf.gz").is_file():
        _missing(f"Debian's FAQ not found at {FAQ}: install the Debian package debian-faq "
                 "(tools/ensure_system_packages.sh does)")  # fmt: skip
    return FAQ


@pytest.fixture(scope="session")
def faq_files(debian_faq: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The FAQ's PDF and plain text, decompressed: ``{"pdf": ..., "txt": ...}``."""
    folder = tmp_path_factory.mktemp("faq")
    found = {}
    for kind in ("pdf", "txt"):
        target = folder / f"debian-faq.{kind}"
        target.write_bytes(gzip.decompress((debian_faq / f"debian-faq.en.{kind}.gz").read_bytes()))
        found[kind] = target
    return found


@pytest.fixture(scope="session")
def docx_samples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """python-docx 1.2.0's source distribution, unpacked: features/steps/test_files/*.docx and README.md."""
    archive = CACHE / DOCX_SDIST
    if not archive.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        fetched = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
             "python-docx==1.2.0", "-d", str(CACHE)],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        if fetched.returncode != 0 or not archive.is_file():
            _missing(f"python-docx's source distribution {DOCX_SDIST} not found at {archive} and not downloadable "
                     f"(pip: {fetched.stderr.strip()[-200:]})")  # fmt: skip
    if hashlib.sha256(archive.read_bytes()).hexdigest() != DOCX_SHA256:
        pytest.fail(f"{archive} does not have the pinned checksum {DOCX_SHA256}; remove it to fetch it again")
    folder = tmp_path_factory.mktemp("python-docx")
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    return folder / "python_docx-1.2.0"
