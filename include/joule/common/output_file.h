// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// A file a command writes as its result: written under "<path>.partial" and
// renamed onto path only when complete, so a run that fails half-way leaves
// neither a truncated file nor an empty one where a good one was before.
// Opening it checks at once that the place is writable. A path that is a
// device or a FIFO (/dev/null, /dev/stdout) is written in place instead,
// never replaced.
#pragma once

#include <fstream>
#include <string>

namespace joule {

class OutputFile {
 public:
  // Throws UsageError naming path when "<path>.partial" cannot be created.
  explicit OutputFile(std::string path);
  ~OutputFile();  // removes the partial file unless committed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  std::ostream& stream() { return out_; }
  const std::string& path() const { return path_; }
  // Flushes, checks every write succeeded and renames into place; throws
  // Error naming path otherwise.
  void commit();

 private:
  bool in_place() const { return partial_path_.empty(); }

  std::string path_;
  std::string partial_path_;  // empty: written in place
  std::ofstream out_;
  bool committed_ = false;
};

}  // namespace joule
