// SPDX-FileCopyrightText: 2026 the joule developers
// SPDX-License-Identifier: Apache-2.0
#include "joule/measure/timeline.h"

#include <gtest/gtest.h>

#include "common/test_support.h"
#include "joule/error.h"

namespace joule {
namespace {

TEST(TimelineTest, WritesOneCsvRowPerSampleWithEmptyUnsampledFields) {
  Timeline timeline({"gpu0", "cpu0-package"});
  TimelineSample a;
  a.time_s = 0.5;
  a.power_w = 123.4567;
  a.gpu_util_percent = 90;
  a.memory_util_percent = 30;
  a.power_capped = 1;
  timeline.add(a);
  TimelineSample b;
  b.time_s = 0.6;
  b.device = 1;
  b.power_w = 40;
  timeline.add(b);
  std::ostringstream out;
  timeline.write_csv(out);
  EXPECT_EQ(out.str(),
            "time_s,device,power_w,gpu_util_percent,memory_util_percent,sm_clock_mhz,temperature_c,memory_used_bytes,"
            "power_capped\n"
            "0.500000,gpu0,123.457,90,30,,,,1\n"
            "0.600000,cpu0-package,40.000,,,,,,\n");
}

TEST(TimelineTest, PowerCappedShareCountsOnlySamplesWhoseStateWasRead) {
  Timeline timeline({"gpu0", "gpu1"});
  const int8_t states[] = {1, 1, -1, 0, 1, 0};  // at 0.0, 0.1, ... 0.5 s
  for (int i = 0; i < 6; ++i) {
    TimelineSample s;
    s.time_s = 0.1 * i;
    s.power_capped = states[i];
    timeline.add(s);
  }
  // (0.05, 0.45]: 1, unread, 0, 1.
  EXPECT_DOUBLE_EQ(timeline.power_capped_share(0, 0.05, 0.45).value(), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(timeline.power_capped_share(0, 0.25, 1.0).value(), 1.0 / 3.0);
  EXPECT_FALSE(timeline.power_capped_share(0, 0.15, 0.25).has_value());  // only the unread one
  EXPECT_FALSE(timeline.power_capped_share(1, 0.0, 1.0).has_value());
}

TEST(TimelineTest, CapacityDropsTheOldestButTheStreamKeepsEverything) {
  testing::TempDir tmp;
  Timeline timeline({"gpu0"}, 3);
  timeline.stream_csv_to(tmp.file("t.csv"));
  for (int i = 0; i < 5; ++i) {
    TimelineSample s;
    s.time_s = i;
    s.power_w = 100 + i;
    timeline.add(s);
  }
  timeline.flush();
  EXPECT_EQ(timeline.size(), 3u);
  EXPECT_EQ(timeline.dropped(), 2u);
  EXPECT_DOUBLE_EQ(timeline.samples().front().time_s, 2.0);
  EXPECT_EQ(testing::read_lines(tmp.file("t.csv")).size(), 6u);  // header + 5
}

TEST(TimelineTest, UnwritablePathFailsAtOnceNamingIt) {
  Timeline timeline({"gpu0"});
  try {
    timeline.stream_csv_to("/nonexistent/dir/t.csv");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/t.csv"), std::string::npos);
  }
  EXPECT_THROW(timeline.write_csv(std::string("/nonexistent/dir/t.csv")), Error);
}

TEST(TimelineTest, PeakIncludesThePowerAtTheWindowStart) {
  Timeline timeline({"gpu0", "gpu1"});
  for (int i = 0; i < 10; ++i) {
    TimelineSample s;
    s.time_s = i;
    s.power_w = i == 3 ? 500 : 100 + i;
    timeline.add(s);
  }
  EXPECT_DOUBLE_EQ(*timeline.peak_power_w(0, 0.0, 9.0), 500.0);
  EXPECT_DOUBLE_EQ(*timeline.peak_power_w(0, 4.0, 6.0), 106.0);
  EXPECT_DOUBLE_EQ(*timeline.peak_power_w(0, 3.2, 3.5), 500.0);  // shorter than an interval
  EXPECT_FALSE(timeline.peak_power_w(1, 0.0, 9.0).has_value());
}

}  // namespace
}  // namespace joule
