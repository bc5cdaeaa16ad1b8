// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/common/output_file.h"
#include "joule/common/input_file.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/test_support.h"
#include "joule/error.h"

namespace joule {
namespace {

TEST(OutputFileTest, ReplacesThePathOnlyWhenCommitted) {
  testing::TempDir tmp;
  const std::string path = tmp.file("r.csv");
  testing::write_file(path, "old\n");
  {
    OutputFile out(path);
    out.stream() << "new\n";
    EXPECT_EQ(testing::read_file(path), "old\n");  // the result is not visible half-written
    out.commit();
  }
  EXPECT_EQ(testing::read_file(path), "new\n");
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
}

TEST(OutputFileTest, AnAbandonedFileLeavesThePreviousOneAndNoPartial) {
  testing::TempDir tmp;
  const std::string path = tmp.file("r.csv");
  testing::write_file(path, "old\n");
  {
    OutputFile out(path);
    out.stream() << "half";
  }  // e.g. an exception before commit()
  EXPECT_EQ(testing::read_file(path), "old\n");
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
}

TEST(OutputFileTest, AnUnwritablePlaceIsNamedAtOnce) {
  try {
    OutputFile out("/nonexistent/dir/r.csv");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write '/nonexistent/dir/r.csv'"), std::string::npos) << e.what();
  }
}

TEST(InputFileTest, ADirectoryWhereAFileIsExpectedSaysSo) {
  testing::TempDir tmp;
  try {
    open_input_file(tmp.path(), "trace");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot read trace '" + tmp.path() + "': it is a directory, a file is expected");
  }
  try {
    open_input_file(tmp.file("missing.csv"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot read '" + tmp.file("missing.csv") + "': No such file or directory");
  }
  testing::write_file(tmp.file("t.csv"), "a\n");
  std::string line;
  std::getline(open_input_file(tmp.file("t.csv")) >> std::ws, line);
  EXPECT_EQ(line, "a");
}

}  // namespace
}  // namespace joule
