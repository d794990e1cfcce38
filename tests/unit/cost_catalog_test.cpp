// The catalog and trace CSVs (cost/csv.h, cost/catalog.h, cost/preemption.h): the
// shipped figures, and errors that name the file, line and column.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "cost/catalog.h"
#include "cost/csv.h"
#include "cost/preemption.h"
#include "test_dirs.h"

namespace elastrain {
namespace {
using ::testing::HasSubstr;

const char* kHeader =
    "name,accelerator,chips_per_host,memory_gib,peak_bf16_tflops,on_demand_usd_per_chip_hour,"
    "spot_usd_per_chip_hour,region,source,price_date\n";

const AcceleratorOffer* Find(const std::vector<AcceleratorOffer>& v, const std::string& name) {
  for (const AcceleratorOffer& o : v)
    if (o.name == name) return &o;
  return nullptr;
}

TEST(CostCatalogTest, EmbeddedCatalogHasThePublishedFigures) {
  auto cat = EmbeddedCatalog();
  ASSERT_TRUE(cat.ok()) << cat.status().message();
  const AcceleratorOffer* v6e = Find(*cat, "gcp-tpu-v6e");
  ASSERT_NE(v6e, nullptr);
  EXPECT_DOUBLE_EQ(v6e->on_demand_usd_per_chip_hour, 2.70);
  EXPECT_DOUBLE_EQ(v6e->spot_usd_per_chip_hour, 0.648);
  EXPECT_DOUBLE_EQ(v6e->peak_flops, 918e12);
  EXPECT_DOUBLE_EQ(v6e->memory_gib, 32);
  const AcceleratorOffer* v5e = Find(*cat, "gcp-tpu-v5e");
  ASSERT_NE(v5e, nullptr);
  EXPECT_DOUBLE_EQ(v5e->on_demand_usd_per_chip_hour, 1.20);
  EXPECT_DOUBLE_EQ(v5e->spot_usd_per_chip_hour, 0.213);
  const AcceleratorOffer* v5p = Find(*cat, "gcp-tpu-v5p");
  ASSERT_NE(v5p, nullptr);
  EXPECT_DOUBLE_EQ(v5p->on_demand_usd_per_chip_hour, 4.20);
  EXPECT_DOUBLE_EQ(v5p->spot_usd_per_chip_hour, 1.68);
  EXPECT_DOUBLE_EQ(v5p->memory_gib, 95);
  for (const char* n : {"gcp-a3-h100", "gcp-a2-a100-40g", "aws-p5-h100", "aws-p4d-a100-40g"})
    EXPECT_NE(Find(*cat, n), nullptr) << n;
  for (const AcceleratorOffer& o : *cat) {
    EXPECT_THAT(o.source, HasSubstr("https://")) << o.name;
    EXPECT_EQ(o.price_date.size(), 7u) << o.name;  // YYYY-MM
    EXPECT_LT(o.spot_usd_per_chip_hour, o.on_demand_usd_per_chip_hour) << o.name;
  }
}

TEST(CostCatalogTest, QuotedFieldsMayHoldCommasAndQuotes) {
  auto t = ParseCsv("a,b\n\"x, y\",\"say \"\"hi\"\"\"\n# comment\n\n 1 , 2 \n", "q.csv");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->rows.size(), 2u);
  EXPECT_EQ(t->rows[0].fields[0], "x, y");
  EXPECT_EQ(t->rows[0].fields[1], "say \"hi\"");
  EXPECT_EQ(t->rows[1].fields[0], "1");
  EXPECT_EQ(t->rows[1].line, 5);
}

TEST(CostCatalogTest, BadNumberNamesFileLineAndColumn) {
  const std::string text = std::string("# prices\n") + kHeader +
                           "ok,TPU,8,32,918,2.7,0.6,us,https://x,2025-01\n"
                           "bad,TPU,8,lots,918,2.7,0.6,us,https://x,2025-01\n";
  auto c = ParseCatalog(text, "my.csv");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "my.csv:4:4: memory_gib='lots': expected a number");
}

TEST(CostCatalogTest, OtherBadRowsAreNamed) {
  auto fields = ParseCatalog(std::string(kHeader) + "a,TPU,8,32,918,2.7\n", "f.csv");
  EXPECT_THAT(fields.status().message(), HasSubstr("f.csv:2:7: expected 10 fields as in the header (line 1), got 6"));
  auto neg = ParseCatalog(std::string(kHeader) + "a,TPU,8,32,918,-2.7,0.6,us,https://x,2025-01\n", "f.csv");
  EXPECT_THAT(neg.status().message(), HasSubstr("f.csv:2:6: on_demand_usd_per_chip_hour=-2.7: expected a number > 0"));
  auto chips = ParseCatalog(std::string(kHeader) + "a,TPU,0,32,918,2.7,0.6,us,https://x,2025-01\n", "f.csv");
  EXPECT_THAT(chips.status().message(), HasSubstr("f.csv:2:3: chips_per_host=0"));
  auto header = ParseCatalog("name,accel\n", "h.csv");
  EXPECT_THAT(header.status().message(), HasSubstr("h.csv:1:2: header column 'accel', expected 'accelerator'"));
  auto quote = ParseCatalog(std::string(kHeader) + "a,\"TPU,8\n", "q.csv");
  EXPECT_THAT(quote.status().message(), HasSubstr("q.csv:2:2: unterminated quoted field"));
  auto empty = ParseCatalog("# nothing\n", "e.csv");
  EXPECT_THAT(empty.status().message(), HasSubstr("e.csv: empty"));
  auto nosource = ParseCatalog(std::string(kHeader) + "a,TPU,8,32,918,2.7,0.6,us,,2025-01\n", "s.csv");
  EXPECT_THAT(nosource.status().message(), HasSubstr("s.csv:2:9: source is empty"));
}

TEST(CostCatalogTest, LoadCatalogReadsAFolderAndRejectsDuplicates) {
  ScopedTempDir scratch("cost_catalog");
  const std::string dir = scratch.path();
  std::ofstream(dir + "/a.csv") << kHeader << "x,TPU,8,32,918,2.7,0.6,us,https://x,2025-01\n";
  std::ofstream(dir + "/b.csv") << kHeader << "y,GPU,8,80,989,11,2.2,us,https://y,2025-01\n";
  auto c = LoadCatalog(dir);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->size(), 2u);
  std::ofstream(dir + "/c.csv") << kHeader << "x,TPU,8,32,918,2.7,0.6,us,https://x,2025-01\n";
  EXPECT_THAT(LoadCatalog(dir).status().message(), HasSubstr("name 'x' appears twice"));
  auto missing = LoadCatalog(dir + "/none.csv");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("none.csv: no such file or directory"));
}

TEST(CostCatalogTest, TraceParsesAndRejectsBadRows) {
  auto t = ParsePreemptionTrace("timestamp_seconds,hosts_lost\n10,1\n3600.5,4\n", "t.csv");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->size(), 2u);
  EXPECT_DOUBLE_EQ((*t)[1].time_seconds, 3600.5);
  EXPECT_EQ((*t)[1].hosts_lost, 4);
  EXPECT_THAT(ParsePreemptionTrace("timestamp_seconds,hosts_lost\n10,1\n5,1\n", "t.csv").status().message(),
              HasSubstr("t.csv:3:1: timestamp_seconds=5"));
  EXPECT_THAT(ParsePreemptionTrace("timestamp_seconds,hosts_lost\n10,0\n", "t.csv").status().message(),
              HasSubstr("t.csv:2:2: hosts_lost=0"));
  EXPECT_THAT(ParsePreemptionTrace("timestamp_seconds,hosts_lost\n10,two\n", "t.csv").status().message(),
              HasSubstr("t.csv:2:2: hosts_lost='two': expected an integer"));
  EXPECT_EQ(LoadPreemptionTrace("/no/such/trace.csv").status().code(), StatusCode::kNotFound);
}

TEST(CostCatalogTest, LossSizes) {
  auto l = ParseLossSizes("1:0.7,2:0.2,4:0.1", "--spot-loss-sizes");
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_NEAR(MeanHostsLost(*l), 0.7 + 0.4 + 0.4, 1e-12);
  EXPECT_EQ(HostsLostFor(*l, 0.0), 1);
  EXPECT_EQ(HostsLostFor(*l, 0.75), 2);
  EXPECT_EQ(HostsLostFor(*l, 0.95), 4);
  EXPECT_THAT(ParseLossSizes("1:0.5,2:0.2", "--spot-loss-sizes").status().message(),
              HasSubstr("--spot-loss-sizes '1:0.5,2:0.2': probabilities sum to 0.7"));
  EXPECT_THAT(ParseLossSizes("1:x", "--loss-sizes").status().message(), HasSubstr("bad entry '1:x'"));
  EXPECT_THAT(ParseLossSizes("0:1", "--loss-sizes").status().message(), HasSubstr("bad entry '0:1'"));
}

}  // namespace
}  // namespace elastrain
