"""Helpers shared by every test module (conftest.py holds only fixtures and pytest hooks).

  paths      where things are: the repository, the build, the interpreters of the matrix,
             the agent builds, the corpus; the environment a target needs for the in-tree
             Python package
  proc       reading /proc (state, tracer, threads), running build/vcattach, dropping
             privileges: what "the target is alive, unstopped and untraced" means
  targets    the one Target helper (start a program with an interpreter, wait until it is
             ready, check it, always clean up) and the target programs' drivers
  agents     a directory of placeholder agent builds for preflight tests
  protocol   the agent control protocol's framing (common/protocol.h), the controller's side
  traces     reading traces: both decoders (which must agree), event selections, nesting
  cvf_writer an independent .cvf writer, known traces, and the summary's oracle
  codec_gen  seeded Chrome traces with what VizTracer's decompressor returns for them

A test module imports from here, never from another test module or from conftest."""
