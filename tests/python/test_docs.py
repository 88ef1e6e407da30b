"""docs/python.md's walkthrough stays current: its examples run, in the repository's root, and
print what the page shows (doctest over the page's code blocks; the matplotlib plot is
skipped)."""

import doctest
import os

from conftest import SOURCE


def test_walkthrough_prints_what_the_page_shows():
    path = os.path.join(SOURCE, "docs", "python.md")
    with open(path, encoding="utf-8") as f:
        # A code fence ends an example's expected output, as a blank line does.
        text = "".join("\n" if line.startswith("```") else line for line in f)
    test = doctest.DocTestParser().get_doctest(text, {}, "docs/python.md", path, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted >= 15
    assert result.failed == 0
