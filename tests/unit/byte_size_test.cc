#include "sys/byte_size.h"

#include <gtest/gtest.h>

namespace llmux::sys {
namespace {

TEST(ByteSize, PlainBytes) { EXPECT_EQ(ParseByteSize("1048576"), 1048576u); }
TEST(ByteSize, BinaryUnits) {
  EXPECT_EQ(ParseByteSize("512K"), 512u * 1024);
  EXPECT_EQ(ParseByteSize("32MiB"), 32u << 20);
  EXPECT_EQ(ParseByteSize("32mb"), 32u << 20);
  EXPECT_EQ(ParseByteSize("2G"), 2ull << 30);
  EXPECT_EQ(ParseByteSize("1.5GiB"), 3ull << 29);
}
TEST(ByteSize, Rejects) {
  EXPECT_FALSE(ParseByteSize(""));
  EXPECT_FALSE(ParseByteSize("MiB"));
  EXPECT_FALSE(ParseByteSize("12XB"));
  EXPECT_FALSE(ParseByteSize("-5M"));
  EXPECT_FALSE(ParseByteSize("1.2.3"));
}

}  // namespace
}  // namespace llmux::sys
