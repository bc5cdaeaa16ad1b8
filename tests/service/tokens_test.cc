// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
// Tokens for `joule serve`: the file (create, read, revoke), what a grant
// allows, the server re-reading a changed file, and who needs a token.
#include "joule/service/tokens.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "common/test_support.h"
#include "joule/error.h"
#include "joule/service/http_server.h"

namespace joule::service {
namespace {

using testing::TempDir;

int status_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const RequestError& e) {
    return e.status();
  }
  return 0;
}

TEST(TokensTest, CreatedTokensAreKeptAsDigestsOnly) {
  TempDir tmp;
  const std::string file = tmp.file("tokens");
  const std::string alice = create_token(file, "alice", {"resnet50", "bert-*"});
  const std::string ci = create_token(file, "ci", {"*"});
  EXPECT_EQ(alice.rfind("joule_", 0), 0u);
  EXPECT_EQ(alice.size(), 6u + 64u);
  EXPECT_NE(alice, ci);
  const std::string text = testing::read_file(file);
  EXPECT_EQ(text.find(alice), std::string::npos) << "the token itself must not be stored";
  EXPECT_NE(text.find(token_digest(alice)), std::string::npos);
  struct stat st {};
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);  // digests only; the service's user reads it
  const auto lines = read_token_file(file);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].grant.user, "alice");
  EXPECT_EQ(lines[0].grant.job_patterns, (std::vector<std::string>{"resnet50", "bert-*"}));
}

TEST(TokensTest, GrantsAllowTheirJobsOnly) {
  const TokenGrant g{"alice", {"resnet50", "bert-*"}};
  EXPECT_TRUE(g.allows("resnet50"));
  EXPECT_FALSE(g.allows("resnet50-big"));
  EXPECT_TRUE(g.allows("bert-large"));
  EXPECT_TRUE(g.allows("bert-"));
  EXPECT_FALSE(g.allows("bert"));
  EXPECT_FALSE(g.allows("vit"));
  EXPECT_TRUE((TokenGrant{"ci", {"*"}}).allows("anything"));
}

TEST(TokensTest, MalformedLinesAreNamedByFileAndLine) {
  TempDir tmp;
  const std::string file = tmp.file("tokens");
  create_token(file, "alice", {"*"});
  std::ofstream(file, std::ios::app) << "# a comment\n\nsha256:abc user=bob jobs=*\n";
  try {
    read_token_file(file);
    FAIL() << "a short digest was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(file + "', line 4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(create_token(file, "", {"*"}), UsageError);
  EXPECT_THROW(create_token(file, "bob", {}), UsageError);
  EXPECT_THROW(create_token(file, "bob", {"a*b"}), UsageError);
  EXPECT_THROW(read_token_file(tmp.file("missing")), Error);
}

TEST(TokensTest, RevokingRewritesTheFileWithoutThoseTokens) {
  TempDir tmp;
  const std::string file = tmp.file("tokens");
  const std::string a1 = create_token(file, "alice", {"*"});
  const std::string a2 = create_token(file, "alice", {"x"});
  const std::string bob = create_token(file, "bob", {"*"});
  EXPECT_EQ(revoke_tokens(file, token_digest(a2).substr(0, 20)), 1);
  EXPECT_EQ(read_token_file(file).size(), 2u);
  EXPECT_EQ(revoke_tokens(file, "alice"), 1);
  const auto left = read_token_file(file);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].sha256_hex, token_digest(bob));
  EXPECT_EQ(revoke_tokens(file, "nobody"), 0);
}

TEST(TokensTest, TheServerSeesRevocationsAndKeepsItsGrantsThroughABadEdit) {
  TempDir tmp;
  const std::string file = tmp.file("tokens");
  const std::string alice = create_token(file, "alice", {"*"});
  const std::string bob = create_token(file, "bob", {"b*"});
  TokenFile tokens(file);
  ASSERT_TRUE(tokens.grant(alice));
  EXPECT_EQ(tokens.grant(bob)->job_patterns, std::vector<std::string>{"b*"});
  EXPECT_FALSE(tokens.grant("joule_" + std::string(64, '0')));
  revoke_tokens(file, "alice");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the file is checked once a second
  EXPECT_FALSE(tokens.grant(alice)) << "a revoked token still works";
  EXPECT_TRUE(tokens.grant(bob));
  std::ofstream(file, std::ios::app) << "garbage\n";
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_TRUE(tokens.grant(bob));
  ASSERT_TRUE(tokens.reload_error());
  EXPECT_NE(tokens.reload_error()->find("line 2"), std::string::npos) << *tokens.reload_error();
}

TEST(TokensTest, OtherMachinesNeedATokenAndThisOneMayBeAskedForOne) {
  TempDir tmp;
  const std::string file = tmp.file("tokens");
  const std::string alice = create_token(file, "alice", {"a*"});
  TokenFile tokens(file);
  // Loopback without a header: everything, tokens or not.
  EXPECT_FALSE(access_of("127.0.0.1", "", &tokens, false).grant);
  EXPECT_FALSE(access_of("::1", "", nullptr, false).grant);
  // Another machine: 401 without a token, and without a tokens file at all.
  EXPECT_EQ(status_of([&] { access_of("10.1.2.3", "", &tokens, false); }), 401);
  EXPECT_EQ(status_of([&] { access_of("10.1.2.3", "", nullptr, false); }), 401);
  EXPECT_EQ(status_of([&] { access_of("10.1.2.3", "Bearer " + alice, nullptr, false); }), 401);
  EXPECT_EQ(status_of([&] { access_of("10.1.2.3", "Basic " + alice, &tokens, false); }), 401);
  EXPECT_EQ(status_of([&] { access_of("10.1.2.3", "Bearer joule_wrong", &tokens, false); }), 401);
  const RequestAccess remote = access_of("10.1.2.3", "Bearer " + alice, &tokens, false);
  ASSERT_TRUE(remote.grant);
  EXPECT_TRUE(remote.allows("a1"));
  EXPECT_FALSE(remote.allows("b1"));
  // --require-token: loopback needs one too, and a token presented on
  // loopback is checked, never ignored.
  EXPECT_EQ(status_of([&] { access_of("127.0.0.1", "", &tokens, true); }), 401);
  EXPECT_EQ(status_of([&] { access_of("127.0.0.1", "Bearer joule_wrong", &tokens, false); }), 401);
  EXPECT_TRUE(access_of("127.0.0.1", "Bearer " + alice, &tokens, true).grant);
}

}  // namespace
}  // namespace joule::service
