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
