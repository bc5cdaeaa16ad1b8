// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/common/output_file.h"
#include "joule/common/input_file.h"

#include <gtest/gtest.h>

#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

// `-o /dev/null` as root renamed a regular file onto /dev/null. A FIFO
// stands in for the device (the test must not risk the machine's
// /dev/null): it must still be a FIFO afterwards, and what was written must
// have gone through it. The test holds both ends, so nothing blocks.
TEST(OutputFileTest, AFifoOrDeviceIsWrittenInPlaceNotReplaced) {
  testing::TempDir tmp;
  const std::string fifo = tmp.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int held = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK);
  ASSERT_GE(held, 0);
  {
    OutputFile out(fifo);
    out.stream() << "through the pipe\n";
    out.commit();
  }
  char buffer[64] = {};
  const ssize_t got = ::read(held, buffer, sizeof buffer);
  ::close(held);
  EXPECT_EQ(std::string(buffer, got > 0 ? static_cast<std::size_t>(got) : 0), "through the pipe\n");
  EXPECT_EQ(std::filesystem::status(fifo).type(), std::filesystem::file_type::fifo);
  EXPECT_FALSE(std::filesystem::exists(fifo + ".partial"));
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
