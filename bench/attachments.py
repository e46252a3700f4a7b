"""What attachments cost the conversion layer: a phone photo and a PDF rendered for every target.

    .venv/bin/python bench/attachments.py [--repeat 7]

For each target, the time to build a request holding a 4000x3000 JPEG (12 MP, fitted to the target's limits) and a
40-page PDF (its text extracted where the target takes no documents): cold (the digest cache emptied first, as for
the first step that sees a file) and warm (a later step of the same run). Milliseconds, median ± half the range.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "llm")]

from attachment_files import pdf, pdf_file  # noqa: E402
from PIL import Image  # noqa: E402

from bench.common import summary  # noqa: E402
from server.llm import Attachment, ChatRequest, Message, RequestOptions  # noqa: E402
from server.llm.convert import (  # noqa: E402
    COMPATIBLE,
    files,
    to_anthropic_request,
    to_google_request,
    to_ollama_request,
    to_openai_request,
)

TARGETS = {
    "openai": ("gpt-4o", to_openai_request),
    "compatible": ("qwen2.5-vl-7b", lambda r: to_openai_request(r, COMPATIBLE)),
    "anthropic": ("claude-opus-4-8", to_anthropic_request),
    "google": ("gemini-2.5-flash", to_google_request),
    "ollama": ("llava:13b", to_ollama_request),
}


def photo() -> bytes:
    out = io.BytesIO()
    gradient = Image.linear_gradient("L").resize((4000, 3000))
    Image.merge("RGB", (gradient, gradient.rotate(90, expand=False), gradient)).save(out, "JPEG", quality=92)
    return out.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    image = Attachment(name="photo.jpg", media_type="image/jpeg", data=photo())
    document = pdf_file(pdf(*(f"Page {n}: the quarterly figures, line after line of them." for n in range(40))))
    print(f"photo: {len(image.data) / 1e6:.1f} MB JPEG, 4000x3000; PDF: {len(document.data) / 1e3:.0f} kB, 40 pages")
    for name, (model, convert) in TARGETS.items():
        request = ChatRequest(
            messages=(Message(role="user", content="What is this?", attachments=(image, document)),),
            options=RequestOptions(model=model),
        )
        cold, warm = [], []
        for _ in range(args.repeat):
            files._cache = files._Cache(files._cache.max_bytes)
            t0 = time.perf_counter()
            convert(request)
            cold.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            convert(request)
            warm.append((time.perf_counter() - t0) * 1000)
        print(f"{name:11} cold {summary(cold)} ms   warm {summary(warm)} ms")


if __name__ == "__main__":
    main()
