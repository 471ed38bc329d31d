"""The include search path's order (gcc's and clang's), and the places a lookup depends on."""

from __future__ import annotations

import os

from annotune.annotate.source.search import SearchPath, has_includes, search_path


def test_quoted_looks_beside_the_includer_then_iquote_then_angled(tmp_path):
    search = SearchPath(quoted=("/q",), angled=("/a", "/b"))
    includer = str(tmp_path / "m.c")
    assert search.candidates(includer, "x.h", quoted=True) == [
        str(tmp_path / "x.h"),
        "/q/x.h",
        "/a/x.h",
        "/b/x.h",
    ]
    assert search.candidates(includer, "x.h", quoted=False) == ["/a/x.h", "/b/x.h"]
    assert search.candidates(includer, "/abs/x.h", quoted=False) == ["/abs/x.h"]


def test_looked_at_stops_at_the_file_found_and_holds_every_place_when_none_is(tmp_path):
    (tmp_path / "b").mkdir()
    found = tmp_path / "b" / "x.h"
    found.write_text("\n")
    search = SearchPath((), (str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "c")))
    places = search.looked_at(str(tmp_path / "m.c"), "x.h", False, str(found))
    assert places == [str(tmp_path / "a" / "x.h"), str(found)]
    missing = search.looked_at(str(tmp_path / "m.c"), "y.h", False, None)
    assert len(missing) == 3
    # a file found by another path than any tried (a link, a macro's name) is kept with all
    elsewhere = search.looked_at(str(tmp_path / "m.c"), "x.h", False, "/elsewhere/x.h")
    assert elsewhere[-1] == "/elsewhere/x.h" and len(elsewhere) == 4


def test_search_path_orders_the_command_and_environment_directories(monkeypatch, tmp_path):
    monkeypatch.setenv("CPATH", f"/cp{os.pathsep}")
    monkeypatch.setenv("C_INCLUDE_PATH", "/cip")
    monkeypatch.setenv("CPLUS_INCLUDE_PATH", "/cplus")
    monkeypatch.chdir(tmp_path)
    flags = [("-isystem", "/sys"), ("-idirafter", "/after"), ("-iquote", "q"), ("-include", "f.h")]
    search = search_path(["/inc"], flags, "c", "/own")
    assert search.quoted == (str(tmp_path / "q"),)
    assert search.angled == ("/inc", "/own", "/cp", str(tmp_path), "/sys", "/cip", "/after")
    assert "/cplus" in search_path([], [], "cuda", "/own").angled


def test_has_include_names_are_lookups_too():
    data = b'#if __has_include("a.h") && __has_include_next(<b.h>)\n#endif\n'
    assert list(has_includes(data)) == [(True, "a.h"), (False, "b.h")]
