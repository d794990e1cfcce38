#include "common/output_tail.h"

#include <string>

#include <gtest/gtest.h>

namespace elastrain {
namespace {

using Lines = std::vector<std::string>;

TEST(OutputTail, KeepsTheLastLinesTrimmedWithoutBlankOnes) {
  OutputTail t;
  t.Append("starting\nTraceback (most recent call last):\n  File \"prog.py\", line 3, in <module>\n");
  t.Append("    import no_such_module\n\nModuleNotFoundError: No module named 'no_such_module'\n");
  EXPECT_EQ(t.Lines(3), (Lines{"File \"prog.py\", line 3, in <module>", "import no_such_module",
                               "ModuleNotFoundError: No module named 'no_such_module'"}));
  EXPECT_EQ(t.Lines().size(), 5u);
  EXPECT_EQ(t.OneLine(2), "import no_such_module | ModuleNotFoundError: No module named 'no_such_module'");
}

TEST(OutputTail, ALastLineWithoutANewlineCountsAndCarriageReturnsEndLines) {
  OutputTail t;
  t.Append("progress 10%\rprogress 20%\rKilled");
  EXPECT_EQ(t.Lines(2), (Lines{"progress 20%", "Killed"}));
}

TEST(OutputTail, IsBoundedAndDropsTheLineTheBoundCut) {
  OutputTail t(64);
  for (int i = 0; i < 1000; ++i) t.Append("line " + std::to_string(i) + "\n");
  const Lines lines = t.Lines(100);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back(), "line 999");
  for (const std::string& l : lines) EXPECT_EQ(l.rfind("line ", 0), 0u) << l;  // no fragment
  size_t bytes = 0;
  for (const std::string& l : lines) bytes += l.size() + 1;
  EXPECT_LE(bytes, 64u);
  OutputTail big(16);
  big.Append(std::string(100, 'x') + "\nend\n");  // one write larger than the bound
  EXPECT_EQ(big.Lines(), (Lines{"end"}));
}

TEST(OutputTail, ControlCharactersAndInvalidUtf8BecomePrintable) {
  OutputTail t;
  t.Append("\x1b[31mred\x1b[0m\tx\x07 caf\xc3\xa9 \xff\xfe bad \xc3 \xe2\x82\xac \xed\xa0\x80 \xc2\x85\n");
  ASSERT_EQ(t.Lines().size(), 1u);
  EXPECT_EQ(t.Lines()[0], "?[31mred?[0m x? caf\xc3\xa9 ?? bad ? \xe2\x82\xac ??? ?");
  EXPECT_EQ(PrintableLine("ok"), "ok");
}

}  // namespace
}  // namespace elastrain
