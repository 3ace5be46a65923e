"""Report text: ASCII math drawn with Unicode and sub/superscripts, printed dicts as prose, everything else escaped."""

from html.parser import HTMLParser

import pytest

from attnlab.report.text import math_html, note_html


class _Tags(HTMLParser):
    """Collect the tags of an HTML fragment, to check the output is well formed and holds only our tags."""

    def __init__(self):
        super().__init__()
        self.open, self.seen = [], set()

    def handle_starttag(self, tag, attrs):
        self.open.append(tag)
        self.seen.add(tag)

    def handle_endtag(self, tag):
        assert self.open and self.open.pop() == tag, f"</{tag}> closes nothing"


def _tags(fragment: str) -> set[str]:
    parser = _Tags()
    parser.feed(fragment)
    parser.close()
    assert not parser.open, f"unclosed {parser.open} in {fragment!r}"
    return parser.seen


@pytest.mark.parametrize(
    ("ascii", "drawn"),
    [
        ("||W_T|| <= eta T", "‖W<sub>T</sub>‖ ≤ η T"),
        (
            "t^(1/3) and t^{2} and 10^-177 and Sigma^1/2",
            "t<sup>1/3</sup> and t<sup>2</sup> and 10<sup>-177</sup> and Σ<sup>1/2</sup>",
        ),
        ("sigma_{n+1}(W/mu) / sigma_1(W/mu)", "σ<sub>n+1</sub>(W/μ) / σ<sub>1</sub>(W/μ)"),
        ("max_i log(1 - phi_opt) -> -inf", "max<sub>i</sub> log(1 - φ<sub>opt</sub>) → -inf"),
        ("KKT (omega0=0.1), lambda_max, L_* +- 1", "KKT (ω<sub>0</sub>=0.1), λ<sub>max</sub>, L<sub>*</sub> ± 1"),
        ("W^mm_q", "W<sup>mm</sup><sub>q</sub>"),
        ("||W_(k+1)||^{p-1}", "‖W<sub>k+1</sub>‖<sup>p-1</sup>"),
        (
            "l_1.1-MD vs l_p-AttGD, e^-Delta_max, Theta(log t)",
            "ℓ<sub>1.1</sub>-MD vs ℓ<sub>p</sub>-AttGD, e<sup>-Δ<sub>max</sub></sup>, Θ(log t)",
        ),
    ],
)
def test_ascii_math_is_drawn_with_unicode_and_scripts(ascii, drawn):
    assert math_html(ascii) == drawn
    assert _tags(drawn) <= {"sub", "sup"}


@pytest.mark.parametrize("text", ["svm_margin of patch_embed", "rel 1e-09", "beta1e-3 betas theta0x", "step 1200"])
def test_words_code_names_and_numbers_stay_as_they_are(text):
    assert math_html(text) == text


def test_markup_is_escaped_never_interpreted():
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt; x<sub>1</sub> &amp; y"
    assert math_html("<script>alert(1)</script> x_1 & y") == escaped
    assert math_html("a_{<b>}") == "a<sub>&lt;b&gt;</sub>"


def test_a_printed_dict_of_numbers_reads_as_pairs():
    note = "final log L per method: {'GD': -4.178435037946123, 'NGD': -70.71039426549262, 'NGD-joint': -70.1}"
    assert note_html(note) == "final log L per method: GD = -4.178, NGD = -70.71, NGD-joint = -70.1"


def test_a_printed_dict_of_dicts_becomes_a_table():
    note = "per p: {1.75: {'max_softmax': 1.0, 'logistic_prob': 0.60523}, 2.0: {'max_softmax': 0.5}}"
    fragment = note_html(note)
    assert fragment.startswith("per p: <table")
    assert "<th>max_softmax</th><th>logistic_prob</th>" in fragment
    assert "<tr><th>1.75</th><td>1</td><td>0.6052</td></tr><tr><th>2</th><td>0.5</td><td></td></tr>" in fragment
    assert _tags(fragment) == {"table", "tr", "th", "td"}


def test_a_printed_list_is_shortened_and_text_around_it_keeps_its_math():
    note = "l1-SVM optimum 0.852232 (beta [-0.22252020116321378, -8.130660834295943e-13]); l2 at mu"
    assert note_html(note) == "l1-SVM optimum 0.852232 (β [-0.2225, -8.131e-13]); l2 at μ"


def test_braces_that_are_not_a_literal_stay_text():
    assert note_html("a set {a, b} and [an open bracket") == "a set {a, b} and [an open bracket"


@pytest.mark.parametrize("note", ["token sets {[0, 1], [2]}", "groups {[1, 2]}"])
def test_braces_that_parse_to_no_value_stay_text(note):
    assert note_html(note) == note  # a set of lists raised TypeError (unhashable) and stopped the whole report


def test_identifiers_after_a_dot_or_colon_keep_their_underscores():
    drawn = math_html("|ratio - 1| <= config.nuc_rtol, polyak:max_step=5, W_t")
    assert "config.nuc_rtol" in drawn and "polyak:max_step=5" in drawn and "W<sub>t</sub>" in drawn


def test_a_printed_table_keeps_its_columns():
    note = "final mean, rows p, columns q:\nq       1.75    2.00\np\n1.75 0.00152 0.00958"
    assert note_html(note) == f'<pre class="note-pre">{note}</pre>'
