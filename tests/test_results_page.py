"""Pages rendered from result files (scripts/results_page.py): every figure comes from
a file a bench wrote, and a figure the files lack fails the page."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from archivist.bench.record import save

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from results_page import RenderError, render, with_fragments  # noqa: E402

RESULT = {
    "tasks": {"relation": {"n": 240, "accuracy": 0.8125, "macro_f1": 0.81}},
    "sizes": [{"messages": 1000}, {"messages": 10000}],
}


def results(tmp_path: Path) -> Path:
    folder = tmp_path / "results"
    save(RESULT, folder / "judge.json", "archivist bench judge pairs.json")
    return folder


def test_a_template_takes_values_tables_commands_and_dates_from_result_files(
    tmp_path: Path,
) -> None:
    folder = results(tmp_path)
    page = folder / "page.md.tmpl"
    page.write_text(
        "Accuracy {{ judge:tasks.relation.accuracy|.2f }} of {{ judge:tasks.relation.n }}; "
        "{{ judge:sizes.1.messages|, }} messages.\n"
        "`{{ command:judge }}`, measured {{ measured:judge }}\n\n"
        "{{ table:judge:judge-tasks }}\n"
    )
    text = render(page, folder)
    assert text.startswith("<!-- generated from docs/results/page.md.tmpl")
    assert "Accuracy 0.81 of 240; 10,000 messages." in text
    assert "`archivist bench judge pairs.json`, measured 20" in text
    assert "| relation | 240 | 0.812 | 0.810 |" in text


@pytest.mark.parametrize(
    ("placeholder", "says"),
    [
        ("{{ judge:tasks.support.accuracy }}", "no 'support'"),
        ("{{ judge:sizes.5.messages }}", "no '5'"),
        ("{{ scale:sizes }}", "no result file"),
        ("{{ table:judge:nothing }}", "no table kind"),
        ("{{ table:judge:scale }}", "has no"),
    ],
)
def test_a_figure_the_files_lack_fails_the_page(
    tmp_path: Path, placeholder: str, says: str
) -> None:
    folder = results(tmp_path)
    page = folder / "page.md.tmpl"
    page.write_text(placeholder)
    with pytest.raises(RenderError, match=says):
        render(page, folder)


def test_a_figure_block_of_another_file_is_rendered_in_place(tmp_path: Path) -> None:
    folder = results(tmp_path)
    (folder / "_figures.md.tmpl").write_text("| relation | {{ judge:tasks.relation.accuracy }} |\n")
    readme = "# Title\n\n<!-- figures: _figures.md.tmpl -->\nold\n<!-- /figures -->\n\nEnd.\n"
    again = with_fragments(readme, folder)
    assert again == (
        "# Title\n\n<!-- figures: _figures.md.tmpl -->\n| relation | 0.8125 |\n"
        "<!-- /figures -->\n\nEnd.\n"
    )
    assert with_fragments(again, folder) == again
