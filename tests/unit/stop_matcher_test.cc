#include "engine/stop_matcher.h"

#include <gtest/gtest.h>

namespace llmux {
namespace {

TEST(StopMatcher, WithoutStopsEverythingPassesThrough) {
  StopMatcher m({});
  EXPECT_EQ(m.Push("hello "), "hello ");
  EXPECT_EQ(m.Push("world"), "world");
  EXPECT_EQ(m.Flush(), "");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, CutsBeforeAStopInsideOnePiece) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.Push("abcENDdef"), "abc");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.Push("more"), "");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcher, HoldsBackAPossibleStopAcrossPieces) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.Push("abcE"), "abc");
  EXPECT_EQ(m.Push("N"), "");
  EXPECT_EQ(m.Push("D tail"), "");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, ReleasesHeldTextWhenItTurnsOutNotToBeAStop) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.Push("abcEN"), "abc");
  EXPECT_EQ(m.Push("x"), "ENx");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, FlushReleasesAHeldPrefixAtTheEnd) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.Push("abcEN"), "abc");
  EXPECT_EQ(m.Flush(), "EN");
}

TEST(StopMatcher, TheEarliestOfSeveralStopsWins) {
  StopMatcher m({"zzz", "b"});
  EXPECT_EQ(m.Push("aaabzzz"), "aaa");
}

TEST(StopMatcher, EmptyStopStringsAreIgnored) {
  StopMatcher m({""});
  EXPECT_EQ(m.Push("abc"), "abc");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, HoldsBackAnIncompleteUtf8Character) {
  StopMatcher m({});
  const std::string euro = "\xE2\x82\xAC";  // U+20AC, 3 bytes
  EXPECT_EQ(m.Push("a" + euro.substr(0, 1)), "a");
  EXPECT_EQ(m.Push(euro.substr(1, 1)), "");
  EXPECT_EQ(m.Push(euro.substr(2)), euro);
}

TEST(StopMatcher, AnIncompleteCharacterAtTheEndBecomesAReplacement) {
  StopMatcher m({});
  EXPECT_EQ(m.Push("a\xF0\x9F"), "a");
  EXPECT_EQ(m.Flush(), "\xEF\xBF\xBD");
}

TEST(StopMatcher, StopStringsWithMultibyteCharacters) {
  StopMatcher m({"\xC3\xA9t\xC3\xA9"});  // "été"
  EXPECT_EQ(m.Push("l\xC3"), "l");
  EXPECT_EQ(m.Push("\xA9t\xC3\xA9!"), "");
  EXPECT_TRUE(m.stopped());
}

TEST(SanitizeUtf8, ReplacesInvalidBytes) {
  EXPECT_EQ(SanitizeUtf8("ok"), "ok");
  EXPECT_EQ(SanitizeUtf8("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), "\xEF\xBF\xBD");                 // overlong form
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD");             // UTF-16 surrogate
  EXPECT_EQ(SanitizeUtf8("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");     // emoji stays
}

TEST(IncompleteUtf8Tail, CountsOnlyAValidUnfinishedSequence) {
  EXPECT_EQ(IncompleteUtf8Tail("abc"), 0u);
  EXPECT_EQ(IncompleteUtf8Tail("a\xE2"), 1u);
  EXPECT_EQ(IncompleteUtf8Tail("a\xE2\x82"), 2u);
  EXPECT_EQ(IncompleteUtf8Tail("a\xE2\x82\xAC"), 0u);
  EXPECT_EQ(IncompleteUtf8Tail("a\xE0\x80"), 0u);  // invalid second byte: not held
}

}  // namespace
}  // namespace llmux
