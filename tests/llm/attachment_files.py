"""Small real files for the attachment tests: images made with Pillow, a PDF written by hand (one text page per
entry), so every test decodes exactly what it sent."""

from __future__ import annotations

import io

from PIL import Image

from server.llm import Attachment


def png(width: int, height: int, color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, "PNG")
    return out.getvalue()


def noisy_jpeg(width: int, height: int) -> bytes:
    """A photo-like JPEG (noise does not compress), for the byte limits."""
    out = io.BytesIO()
    Image.effect_noise((width, height), 80).convert("RGB").save(out, "JPEG", quality=95)
    return out.getvalue()


def pdf(*pages: str) -> bytes:
    """A valid PDF with one page of Helvetica text per argument."""
    objects: list[bytes] = []
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(len(pages)))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i, text in enumerate(pages):
        stream = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            f"/Contents {5 + 2 * i} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % n + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def image_file(data: bytes, name: str = "photo.png", media_type: str = "image/png") -> Attachment:
    return Attachment(name=name, media_type=media_type, data=data, file_id=f"f-{name}")


def pdf_file(data: bytes, name: str = "report.pdf") -> Attachment:
    return Attachment(name=name, media_type="application/pdf", data=data, file_id=f"f-{name}")


def text_file(text: str, name: str = "notes.py", media_type: str = "text/plain") -> Attachment:
    return Attachment(name=name, media_type=media_type, data=text.encode(), file_id=f"f-{name}")
