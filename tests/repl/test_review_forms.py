"""The REPL forms over proposals: (review) lists them with their patches, (review-show), (review-accept) whole or
some headlines, (review-reject) with a reason; the first screen counts those pending."""

import cortex.api as cx
from tests.repl.test_core import Transcript

MEMORY = "agents/assistant/memory.org"


def test_the_review_forms_list_show_accept_and_reject(tmp_path, org):
    with cx.open(tmp_path / "store", org, review=True) as c:
        c.ingest()
        c.memory.add_item("assistant", "fact", "The staging database moved to eu-west-2.")
        c.memory.add_item("assistant", "fact", "Prefers tabs.")
        first, second = (p.id for p in c.proposals())
    repl = Transcript(tmp_path / "store", org)
    try:
        repl.session.open()  # as the REPL does when it starts
        assert repl.notices[-1] == "2 proposals pending review: (review) lists them"
        listed = repl("(review)")
        assert listed.startswith(f"{first}  assistant  ") and "  +** Prefers tabs." in listed
        assert repl(f'(review-show "{second[:5]}")').splitlines()[0].startswith(f"{second}  assistant  ")
        assert repl(f'(review-accept "{first}" "Facts / The staging database moved to eu-west-2.")').startswith(
            f"accepted {first} (only Facts / The staging database moved to eu-west-2.): 1 file changed")
        assert repl(f'(review-reject "{second}" :reason "not a fact")').strip() == f"rejected {second}: not a fact"
        text = (org / MEMORY).read_text()
        assert "eu-west-2" in text and "Prefers tabs." not in text
        assert repl('(review :status "rejected")').splitlines()[0].endswith("not a fact")
        assert repl("(review)").strip() == "no proposals pending"
        assert repl('(review-accept "zz")').startswith("error: 'zz' is not a proposal id")
    finally:
        repl.session.close()
