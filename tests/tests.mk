# tests/ — `make test`: builds everything (and the sanitizer/fuzz builds the parts add to
# TEST_PREREQS), then runs the whole suite with Debian's pytest.  Target processes are started
# with each interpreter of the matrix explicitly (tests/conftest.py finds them).
PYTEST_ARGS ?=
test: all $(TEST_PREREQS)
	cd tests && $(PYTHON_HOST) -m pytest -q -rs -p no:cacheprovider $(PYTEST_ARGS)
