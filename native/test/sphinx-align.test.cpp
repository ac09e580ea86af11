// Live pocketsphinx's alignment of a final hypothesis to the words already sent (stt/sphinx.h): only the rest is
// sent, and a revised word counts as replaced, not as new.
#include "harness.h"

#include "stt/sphinx.h"

VOXD_TEST("sphinx-align: words already sent are found at the start of the hypothesis") {
    CHECK_EQ(voxd_sphinx_align({ "the", "cat" }, { "the", "cat", "sat" }), (size_t) 2);
    CHECK_EQ(voxd_sphinx_align({}, { "the", "cat" }), (size_t) 0);
    CHECK_EQ(voxd_sphinx_align({ "the", "cat" }, { "the", "cat" }), (size_t) 2);
}

VOXD_TEST("sphinx-align: a revised word is a substitution; a dropped or added word shifts the cut") {
    CHECK_EQ(voxd_sphinx_align({ "the", "hat" }, { "the", "cat", "sat" }), (size_t) 2);        // hat -> cat
    CHECK_EQ(voxd_sphinx_align({ "the", "big", "cat" }, { "the", "cat", "sat" }), (size_t) 2); // "big" dropped
    CHECK_EQ(voxd_sphinx_align({ "a", "cat" }, { "a", "black", "cat", "sat" }), (size_t) 3);   // "black" added
    CHECK_EQ(voxd_sphinx_align({ "one", "two", "three" }, { "one" }), (size_t) 1);             // the hypothesis is shorter
}
