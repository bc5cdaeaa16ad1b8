// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// What `joule --help` promises: every subcommand listed, each with an
// example in its own help, and a bash completion that offers them all.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "common/test_support.h"

namespace joule {
namespace {

using testing::run_process;

std::vector<std::string> subcommands() {
  const auto help = run_process({JOULE_BINARY, "--help"});
  std::vector<std::string> names;
  std::istringstream lines(help.out);
  bool listing = false;
  for (std::string line; std::getline(lines, line);) {
    if (line == "Subcommands:") {
      listing = true;
    } else if (listing && line.rfind("  ", 0) == 0 && line.size() > 2 && line[2] != ' ') {
      names.push_back(line.substr(2, line.find(' ', 2) - 2));
    } else if (listing && line.empty()) {
      listing = false;
    }
  }
  return names;
}

TEST(HelpCliTest, EverySubcommandIsListedWithAnExample) {
  const auto top = run_process({JOULE_BINARY, "--help"});
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_NE(top.out.find("Exit status: 0 success; 1 an error"), std::string::npos) << top.out;
  const std::vector<std::string> names = subcommands();
  ASSERT_GE(names.size(), 8u) << top.out;
  for (const auto& name : names) {
    const auto help = run_process({JOULE_BINARY, name, "--help"});
    EXPECT_EQ(help.exit_code, 0) << name;
    EXPECT_NE(help.out.find("Example"), std::string::npos) << name << ":\n" << help.out;
    EXPECT_NE(help.out.find("  joule " + name), std::string::npos) << name << ":\n" << help.out;
  }
}

// Runs the completion function as bash would, with build/bin first on PATH.
std::string complete(const std::string& words, int current) {
  const std::string bin = std::filesystem::path(JOULE_BINARY).parent_path();
  const std::string script = std::string(JOULE_SOURCE_DIR) + "/packaging/bash-completion/joule";
  const auto r = run_process({"/bin/bash", "-c",
                              "source '" + script + "'; COMP_WORDS=(" + words + "); COMP_CWORD=" +
                                  std::to_string(current) + "; _joule; echo \"${COMPREPLY[*]}\""},
                             {{"PATH", bin + ":/usr/bin:/bin"}});
  return r.out;
}

TEST(HelpCliTest, BashCompletionOffersSubcommandsAndTheirOptions) {
  const std::string all = complete("joule ''", 1);
  for (const auto& name : subcommands()) EXPECT_NE((" " + all).find(" " + name + " "), std::string::npos) << all;
  EXPECT_EQ(complete("joule simulate --drift", 2), "--drift-after --drift-scale\n");
  EXPECT_NE(complete("joule sweep --", 2).find("--dry-run"), std::string::npos);
  EXPECT_NE(complete("joule measure -- pyth", 3).find("python3"), std::string::npos);  // the measured command
}

// Every flag of `joule serve` is described in its help and completed.
TEST(HelpCliTest, ServeHelpAndCompletionCoverEveryFlag) {
  const std::string help = run_process({JOULE_BINARY, "serve", "--help"}).out;
  std::string offered = " " + complete("joule serve --", 2);  // " --a --b\n"
  if (offered.back() == '\n') offered.back() = ' ';
  for (const std::string flag : {"--store", "--listen", "--max-body-kb", "--read-timeout-s", "--port-file", "--quiet"}) {
    const auto at = help.find("  " + flag + " ");
    ASSERT_NE(at, std::string::npos) << flag << " is not in:\n" << help;
    // Its entry runs to the next option or the end of the list (a long one's
    // description is on the next line).
    const std::string entry = help.substr(at, std::min(help.find("\n  -", at), help.find("\n\n", at)) - at);
    EXPECT_GT(entry.size(), flag.size() + 40) << "no description: " << entry;
    EXPECT_NE(offered.find(" " + flag + " "), std::string::npos) << flag << " is not offered:" << offered;
  }
}

}  // namespace
}  // namespace joule
