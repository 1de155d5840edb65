"""The codec against real VizTracer files (../shared/corpus; skipped when absent):
  - every NAME.cvf decodes, with our C converter and our Python reader, to the events of
    NAME.expected.json (VizTracer's own decompressor output), file_info included;
  - every NAME.json converts to a .cvf no bigger than 1.02 x VizTracer's NAME.cvf, which
    decodes back to NAME.expected.json's events (within 0.01 us: we round, VizTracer
    truncates), identically with our C and Python readers."""
import os

import pytest

from support.paths import CORPUS, corpus_names
from support.traces import convert, events_diff, load_json
from vcattach import cvf

NAMES = corpus_names()
pytestmark = pytest.mark.skipif(not NAMES, reason="../shared/corpus is absent (a user's "
                                "clone): the corpus tests need it")


@pytest.mark.parametrize("name", NAMES)
def test_decode_matches_viztracer(name, tmp_path):
    src = os.path.join(CORPUS, name + ".cvf")
    expected = load_json(os.path.join(CORPUS, name + ".expected.json"))
    out = str(tmp_path / "out.json")
    convert(src, out)
    ours = load_json(out)
    py = cvf.load(src)
    assert set(ours) == set(expected), "top-level keys differ"
    for label, got in (("C", ours), ("python", py)):
        diff = events_diff(expected["traceEvents"], got["traceEvents"], 0.001)
        assert diff is None, "%s decoder differs from VizTracer on %s:\n%s" % (label, name, diff)
        assert got.get("file_info") == expected.get("file_info")
    assert ours == py, "C and Python decoders disagree (order or values)"


@pytest.mark.parametrize("name", NAMES)
def test_json_roundtrip_and_size(name, tmp_path):
    src = os.path.join(CORPUS, name + ".json")
    if not os.path.exists(src):
        pytest.skip("no %s.json in the corpus" % name)
    expected = load_json(os.path.join(CORPUS, name + ".expected.json"))
    ours_cvf = str(tmp_path / "ours.cvf")
    back = str(tmp_path / "back.json")
    convert(src, ours_cvf)
    size, ref = os.path.getsize(ours_cvf), os.path.getsize(os.path.join(CORPUS, name + ".cvf"))
    assert size <= 1.02 * ref, "our .cvf is %d bytes, VizTracer's %d" % (size, ref)
    convert(ours_cvf, back)
    got = load_json(back)
    diff = events_diff(expected["traceEvents"], got["traceEvents"], 0.0101)
    assert diff is None, "round trip of %s differs:\n%s" % (name, diff)
    assert got.get("file_info") == expected.get("file_info")
    assert cvf.load(ours_cvf) == got, "C and Python decoders disagree on our .cvf"
