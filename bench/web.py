"""What web_fetch gives the model, and what it costs: extraction time and tokens per page shape.

For each saved page in bench/web_pages/ (a news article, a docs page, a forum thread: synthetic pages built
with the boilerplate real ones carry — scripts, styles, nav, cookie banner, ads, related links, footers — and
a six-page PDF report), the raw body's tokens, the extracted text's tokens, the framed result's tokens (cut at
TUSK_WEB_MAX_TOKENS' default, 4,000), and the median extraction time over `runs` runs (trafilatura for HTML,
pypdf for the PDF). The first extraction, which imports trafilatura, is timed apart.

    python bench/web.py [--runs 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.tools.web import extract  # noqa: E402
from memory.tokens import count_text  # noqa: E402

PAGES = Path(__file__).parent / "web_pages"
SHAPES = (("news", "news.html", "text/html"), ("docs", "docs.html", "text/html"),
          ("forum", "forum.html", "text/html"), ("PDF report", "report.pdf", "application/pdf"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    runs = parser.parse_args().runs
    start = time.perf_counter()
    extract.extract((PAGES / "news.html").read_text(), "text/html", "https://example.org/news")
    first = time.perf_counter() - start
    print(f"first extraction (imports trafilatura): {first * 1000:.0f} ms\n")
    print("| page | raw bytes | raw tokens | text tokens | framed tokens | extraction (median) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, file, kind in SHAPES:
        raw = (PAGES / file).read_bytes()
        body: str | bytes = raw if kind == "application/pdf" else raw.decode()
        raw_tokens = count_text(raw.decode("latin-1"))
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            page = extract.extract(body, kind, f"https://example.org/{file}")
            times.append(time.perf_counter() - t0)
        framed = extract.frame(page, 4000)
        print(f"| {name} | {len(raw):,} | {raw_tokens:,} | {count_text(page.text):,} | {count_text(framed):,} | "
              f"{statistics.median(times) * 1000:.1f} ms |")


if __name__ == "__main__":
    main()
