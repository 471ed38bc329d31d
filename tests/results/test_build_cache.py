"""`annotune build`'s cache: a record holds while every input holds the same bytes."""

from __future__ import annotations

from annotune.results.build_cache import (
    BuildRecord,
    build_key,
    file_digests,
    load_record,
    record_path,
    save_record,
)


def test_a_record_holds_until_an_input_changes_or_appears(tmp_path):
    source, header, config = tmp_path / "s.c", tmp_path / "s.h", tmp_path / "annotune.toml"
    source.write_text("int x;\n")
    header.write_text("#define A 1\n")
    key = build_key("version", str(source), "device")
    record = BuildRecord(file_digests([source, header, config]), None, "#define A 1\n", {"d": ""})
    assert record.inputs[str(config)] is None  # no config there: its appearing is a change
    assert save_record(source, key, record) == ""
    assert load_record(source, key) == record
    assert load_record(source, build_key("version", str(source), "other device")) is None

    header.write_text("#define A 2\n")
    assert load_record(source, key) is None
    header.write_text("#define A 1\n")
    assert load_record(source, key) == record  # the bytes, not the time they were written
    config.write_text("")
    assert load_record(source, key) is None


def test_a_garbled_record_is_a_miss_and_an_unwritable_one_is_said(tmp_path):
    source = tmp_path / "s.c"
    source.write_text("int x;\n")
    key = build_key("k")
    path = record_path(source, key)
    path.parent.mkdir(parents=True)
    path.write_text('{"inputs": [1, 2]')
    assert load_record(source, key) is None
    path.unlink()
    path.mkdir()  # a directory in the way
    assert "cannot write" in save_record(source, key, BuildRecord({}))


def _saved(tmp_path):
    source = tmp_path / "s.c"
    source.write_text("int x;\n")
    key = build_key("hostile")
    record = BuildRecord(file_digests([source]), None, "#define A 1\n", {})
    assert save_record(source, key, record) == ""
    return source, key, record, record_path(source, key)


def test_a_link_in_a_records_place_is_replaced_never_written_through(tmp_path):
    source, key, record, path = _saved(tmp_path)
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's file\n")
    path.unlink()
    path.symlink_to(outside)
    assert load_record(source, key) is None  # read through no link: a miss
    assert save_record(source, key, record) == ""
    assert outside.read_text() == "the user's file\n"
    assert not path.is_symlink() and load_record(source, key) == record


def test_a_fifo_a_huge_file_or_deep_nesting_in_a_records_place_is_a_miss(tmp_path):
    import os

    source, key, record, path = _saved(tmp_path)
    path.unlink()
    os.mkfifo(path)
    assert load_record(source, key) is None  # at once: no writer is waited for
    assert save_record(source, key, record) == "" and load_record(source, key) == record
    with open(path, "r+b") as file:  # sparse: 8 GiB on paper, nothing on disk
        file.truncate(8 * 2**30)
    assert load_record(source, key) is None
    path.write_text("[" * 200_000 + "]" * 200_000)
    assert load_record(source, key) is None
