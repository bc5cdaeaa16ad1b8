// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/common/utf8.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

namespace joule {
namespace {

TEST(Utf8Test, WellFormedTextIsValid) {
  for (const std::string text : {"", "plain ascii", "NVIDIA H200 – 141 GB", "日本語", "\xF0\x9F\x94\x8B battery"}) {
    EXPECT_TRUE(is_valid_utf8(text)) << text;
  }
}

TEST(Utf8Test, TheFirstIllFormedByteIsNamed) {
  struct Case {
    std::string text;
    std::size_t at;
  };
  const Case cases[] = {
      {"\xFF", 0},                  // never a UTF-8 byte
      {"ab\x80", 2},                // a continuation byte alone
      {"a\xC3", 1},                 // cut short
      {"\xC0\xAF", 0},              // overlong '/'
      {"x\xE0\x80\xAF", 1},         // overlong, three bytes
      {"\xED\xA0\x80", 0},          // a UTF-16 surrogate
      {"ok \xF4\x90\x80\x80", 3},   // past U+10FFFF
      {"\xE2\x82", 0},              // cut short before the end
  };
  for (const Case& c : cases) {
    ASSERT_TRUE(first_invalid_utf8(c.text).has_value()) << printable(c.text);
    EXPECT_EQ(*first_invalid_utf8(c.text), c.at) << printable(c.text);
  }
}

TEST(Utf8Test, PrintableIsValidOneLineAndTellsInputsApart) {
  EXPECT_EQ(printable("gpu\xFFmodel"), "gpu\\xFFmodel");
  EXPECT_EQ(printable("a\nb\tc"), "a\\x0Ab\\x09c");
  EXPECT_EQ(printable("H200 – ok"), "H200 – ok");
  // A literal backslash-x in the input is not mistaken for an escape.
  EXPECT_NE(printable("\\xFF"), printable("\xFF"));
  for (int byte = 0; byte < 256; ++byte) {
    const std::string out = printable(std::string("<") + static_cast<char>(byte) + ">");
    EXPECT_TRUE(is_valid_utf8(out)) << byte;
    EXPECT_EQ(out.find('\n'), std::string::npos) << byte;
    EXPECT_NO_THROW((void)nlohmann::json(out).dump()) << byte;
  }
}

TEST(Utf8Test, ValidTextIsKeptWholeAndOtherTextShownPrintable) {
  EXPECT_EQ(valid_utf8_or_printable("line one\nH200 – two"), "line one\nH200 – two");
  EXPECT_EQ(valid_utf8_or_printable("a\nb\xFF"), printable("a\nb\xFF"));
  EXPECT_EQ(valid_utf8_or_printable("a\nb\xFF"), "a\\x0Ab\\xFF");
}

}  // namespace
}  // namespace joule
