"""The one rule of which images may be sent to a model (`ctxoffload._media`), checked against
a real decoder (Pillow, a test dependency only): every real PNG, JPEG, GIF and WebP within
the limits is sent with the size Pillow reads; a truncated one, a damaged PNG, a header
claiming billions of pixels, a decompression bomb, and bytes said to be another kind are
not."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from ctxoffload._media import MAX_IMAGE_BYTES, MAX_IMAGE_SIDE, check_image
from helpers import examples, png_image


def _image(kind: str, width: int = 37, height: int = 23, **options: object) -> bytes:
    """A real image made by Pillow: a gradient, so that compression leaves real data."""
    picture = Image.new("RGB", (width, height))
    picture.putdata(
        [
            ((x * 7) % 256, (y * 11) % 256, (x + y) % 256)
            for y in range(height)
            for x in range(width)
        ]
    )
    out = io.BytesIO()
    picture.save(out, format=kind, **options)
    return out.getvalue()


REAL = {
    "png": (_image("PNG"), "image/png"),
    "jpeg": (_image("JPEG", quality=80), "image/jpeg"),
    "jpeg-progressive": (_image("JPEG", progressive=True), "image/jpeg"),
    "gif": (_image("GIF"), "image/gif"),
    "webp-lossy": (_image("WEBP", quality=70), "image/webp"),
    "webp-lossless": (_image("WEBP", lossless=True), "image/webp"),
}


def _decodes(data: bytes) -> bool:
    """Whether Pillow decodes every pixel of `data`."""
    try:
        with Image.open(io.BytesIO(data)) as picture:
            picture.load()
    except Exception:
        return False
    return True


@pytest.mark.parametrize("name", sorted(REAL))
def test_a_real_image_is_sent_with_the_size_a_decoder_reads(name: str) -> None:
    data, media_type = REAL[name]
    assert _decodes(data)
    check = check_image(data, media_type)
    assert check.problem is None, check
    assert (check.media_type, check.width, check.height) == (media_type, 37, 23)


def test_an_animated_gif_and_webp_are_images_too() -> None:
    frames = [Image.new("RGB", (16, 9), (i * 40, 0, 0)) for i in range(3)]
    for kind, media_type in (("GIF", "image/gif"), ("WEBP", "image/webp")):
        out = io.BytesIO()
        frames[0].save(out, format=kind, save_all=True, append_images=frames[1:], duration=50)
        check = check_image(out.getvalue())
        assert check.problem is None and (check.width, check.height) == (16, 9), (kind, check)
        assert check.media_type == media_type


@pytest.mark.slow
@settings(max_examples=examples(400), deadline=None)
@given(name=st.sampled_from(sorted(REAL)), cut=st.floats(0.0, 1.0, exclude_max=True))
def test_a_truncated_image_is_never_sent(name: str, cut: float) -> None:
    data, _ = REAL[name]
    kept = data[: max(1, int(len(data) * cut))]
    assert not check_image(kept).is_sendable


def test_the_last_byte_missing_is_enough_to_refuse() -> None:
    for name, (data, _) in REAL.items():
        assert not check_image(data[:-1]).is_sendable, name


@settings(max_examples=examples(400), deadline=None)
@given(at=st.integers(0, 10_000), value=st.integers(0, 255))
def test_a_png_sent_is_a_png_a_decoder_reads(at: int, value: int) -> None:
    data = bytearray(REAL["png"][0])
    data[at % len(data)] = value
    if check_image(bytes(data)).is_sendable:
        assert _decodes(bytes(data))


def test_a_header_claiming_billions_of_pixels_is_described_not_sent() -> None:
    # The file: 1,739,357,314 × 2,995,735,735 pixels in the header, a few bytes long.
    data = png_image(1_739_357_314, 2_995_735_735, rows=bytes(64))
    check = check_image(data, "image/png")
    assert not check.is_sendable
    assert "1739357314×2995735735" in check.problem  # type: ignore[operator]
    assert "1739357314×2995735735 pixels" in check.describe("x.png")


def test_a_decompression_bomb_is_refused_by_its_header_before_anything_is_inflated() -> None:
    side = MAX_IMAGE_SIDE + 1
    data = png_image(side, side, depth=1, level=9)  # 1 bit a pixel: 8 MB inflated
    assert len(data) < 100_000 and _decodes(data)
    check = check_image(data)
    assert not check.is_sendable and f"{side}×{side}" in (check.problem or "")


def test_an_image_over_the_bytes_a_model_takes_is_not_sent() -> None:
    data = REAL["png"][0]
    check = check_image(data[:64], size=MAX_IMAGE_BYTES + 1)
    assert not check.is_sendable and f"{MAX_IMAGE_BYTES:,} bytes" in (check.problem or "")
    assert (check.width, check.height) == (37, 23)  # still described from its header


def test_a_damaged_png_chunk_is_not_sent() -> None:
    data = bytearray(REAL["png"][0])
    data[40] ^= 0xFF  # inside the IDAT chunk
    check = check_image(bytes(data))
    assert not check.is_sendable and "CRC" in (check.problem or "")


def test_bytes_said_to_be_another_kind_are_not_sent() -> None:
    check = check_image(REAL["jpeg"][0], "image/png")
    assert not check.is_sendable
    assert check.problem == "it is said to be image/png but its bytes are image/jpeg"


@pytest.mark.parametrize(
    "data",
    [b"GIF89a" + b"text after a signature\n" * 50, b"\x00\x01\x02" * 100, b""],
)
def test_what_is_no_image_is_not_sent(data: bytes) -> None:
    check = check_image(data, "image/gif")
    assert (
        not check.is_sendable and check.problem == "its bytes are no PNG, JPEG, GIF or WebP image"
    )


def test_a_jpeg_without_image_data_is_not_sent() -> None:
    # The frame header says 1024×768, but the file ends there: no scan, no pixel.
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, 768, 1024, 1) + b"\x01\x11\x00"
    check = check_image(b"\xff\xd8" + sof0 + b"\xff\xd9" + b"\x00" * 8)
    assert not check.is_sendable and (check.width, check.height) == (1024, 768)
