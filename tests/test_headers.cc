// The translation unit that builds the test executables' shared precompiled
// header (tests/CMakeLists.txt, umlab_test_headers). It has no tests: the
// executable it makes is never run (ctest does not list it).
