"""The report page is self-contained: embedded images decode, text is escaped, nothing is fetched."""

import base64
import io
import re

import matplotlib.image as mpimg
import matplotlib.pyplot as plt

from possym.report.html import Image, Section, Table, render


def png() -> bytes:
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [0, 1])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def test_the_page_embeds_every_image_and_escapes_text():
    claims = [{"claim": "a < b & c", "verdict": "match"}, {"claim": "x", "verdict": "differs"}]
    page = render("t <1>", [Section("S", images=[Image("cap", png())], tables=[Table("tab", [{"k": "<v>"}])])], claims)
    data = re.findall(r"src='data:image/png;base64,([^']+)'", page)
    assert len(data) == 1 and mpimg.imread(io.BytesIO(base64.b64decode(data[0]))).shape[0] > 10
    assert "a &lt; b &amp; c" in page and "&lt;v&gt;" in page and "t &lt;1&gt;" in page
    assert "Claims this run can grade (2): 1 match, 1 differs" in page
    assert not re.search(r"src=['\"](?!data:)", page), "a report must not load anything from outside itself"
    assert not re.search(r"<link\b", page)  # no stylesheet or resource fetched: a link a reader follows is an <a>


def test_the_tally_counts_only_what_the_run_could_grade():
    claims = [{"claim": "a", "verdict": "match"}, {"claim": "b", "verdict": "n/a"},
              {"claim": "c", "verdict": "verified", "kind": "verification"}]
    page = render("t", [], claims)
    assert "Claims this run can grade (1): 1 match" in page
    assert "1 n/a here" in page and "1 verifications" in page
