// The one JSON layer (common/json.h): strict records name the field of every error,
// StrictReader requires every field, lenient readers give defaults, ParseJson never throws.
#include "common/json.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace elastrain {
namespace {

struct Inner {
  int8_t small = 0;
  std::string name;
};
struct Outer {
  int rank = -1;
  uint32_t count = 0;
  int64_t big = 0;
  double loss = 0;
  float scale = 1;
  bool on = false;
  std::string text = "default";
  Inner inner;
  std::vector<Inner> items;
  std::map<std::string, std::vector<double>> series;
};
ELASTRAIN_JSON_RECORD(Inner, small, name)
ELASTRAIN_JSON_RECORD(Outer, rank, count, big, loss, scale, on, text, inner, items, series)

// The message of a record that does not read; "" when it reads.
std::string RecordError(const std::string& text, const RecordRules& rules = {}) {
  Result<Outer> r = ParseRecord<Outer>(text, "test record", rules);
  return r.ok() ? "" : r.status().message();
}

TEST(JsonRecord, ReadsEveryFieldAndKeepsDefaultsOfMissingKeys) {
  auto r = ParseRecord<Outer>(
      R"({"rank": 3, "count": 4294967295, "big": -9223372036854775808, "loss": 2, "scale": 0.5, "on": true,
          "inner": {"small": -128, "name": "n"}, "items": [{"small": 1}, {"name": "b"}],
          "series": {"a": [1, 2.5]}, "unknown": [1, 2]})",
      "test record");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->rank, 3);
  EXPECT_EQ(r->count, 4294967295u);
  EXPECT_EQ(r->big, INT64_MIN);
  EXPECT_EQ(r->loss, 2.0);  // a floating field takes an integer
  EXPECT_EQ(r->scale, 0.5f);
  EXPECT_TRUE(r->on);
  EXPECT_EQ(r->text, "default");  // missing: the default
  EXPECT_EQ(r->inner.small, -128);
  EXPECT_EQ(r->inner.name, "n");
  ASSERT_EQ(r->items.size(), 2u);
  EXPECT_EQ(r->items[0].small, 1);
  EXPECT_EQ(r->items[1].name, "b");
  EXPECT_EQ(r->series.at("a"), (std::vector<double>{1, 2.5}));
  // Written and read back: the same record.
  const nlohmann::json again = *r;
  auto back = ParseRecord<Outer>(again, "again");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(nlohmann::json(*back), again);
}

TEST(JsonRecord, WrongTypesNameTheFieldTheValueAndTheExpectation) {
  struct Case {
    std::string text, message;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"rank": "3"})", "test record: field 'rank': expected an integer, got a string (\"3\")"},
           {R"({"rank": 1.0})", "test record: field 'rank': expected an integer, got a number (1.0)"},
           {R"({"rank": 4.2e14})", "test record: field 'rank': expected an integer, got a number (420000000000000.0)"},
           {R"({"loss": "x"})", "test record: field 'loss': expected a number, got a string (\"x\")"},
           {R"({"on": 1})", "test record: field 'on': expected true or false, got an integer (1)"},
           {R"({"text": null})", "test record: field 'text': expected a string, got null"},
           {R"({"inner": 5})", "test record: field 'inner': expected an object, got an integer (5)"},
           {R"({"inner": {"name": 7}})", "test record: field 'inner.name': expected a string, got an integer (7)"},
           {R"({"items": {}})", "test record: field 'items': expected an array, got an object ({})"},
           {R"({"items": [{}, {"small": "a"}]})",
            "test record: field 'items[1].small': expected an integer, got a string (\"a\")"},
           {R"({"series": {"a": [1, "x"]}})",
            "test record: field 'series.a[1]': expected a number, got a string (\"x\")"},
           {R"([1, 2])", "test record: expected a JSON object, got an array ([1,2])"},
       }) {
    EXPECT_EQ(RecordError(c.text), c.message) << c.text;
  }
}

TEST(JsonRecord, IntegersOutOfTheFieldsRangeAreRefused) {
  struct Case {
    std::string text, message;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"rank": 2147483648})",
            "test record: field 'rank': 2147483648 is out of range: expected an integer in [-2147483648, 2147483647]"},
           {R"({"rank": -2147483649})", "test record: field 'rank': -2147483649 is out of range"},
           {R"({"count": -1})", "test record: field 'count': -1 is out of range: expected an integer in [0, 4294967295]"},
           {R"({"big": 18446744073709551615})", "test record: field 'big': 18446744073709551615 is out of range"},
           {R"({"inner": {"small": 128}})", "test record: field 'inner.small': 128 is out of range: expected an "
                                            "integer in [-128, 127]"},
           {R"({"scale": 1e300})", "test record: field 'scale': 1e+300 is out of range"},
       }) {
    const std::string message = RecordError(c.text);
    EXPECT_EQ(message.substr(0, c.message.size()), c.message) << c.text << ": " << message;
  }
}

TEST(JsonRecord, RulesRequireKeysAndRefuseUnknownOnes) {
  EXPECT_EQ(RecordError(R"({"rank": 1})", {.required = {"rank", "text"}}), "test record: field 'text': missing");
  EXPECT_EQ(RecordError(R"({"rank": 1, "text": "t"})", {.required = {"rank", "text"}}), "");
  EXPECT_EQ(RecordError(R"({"rank": 1, "extra": 2})"), "");  // unknown keys pass by default
  const std::string unknown = RecordError(R"({"rank": 1, "extra": 2})", {.reject_unknown = true});
  EXPECT_EQ(unknown.rfind("test record: field 'extra': unknown (the fields are rank, count, big,", 0), 0u) << unknown;
  const std::string long_key(500, 'k');
  const std::string shown = RecordError("{\"" + long_key + "\": 1}", {.reject_unknown = true});
  EXPECT_LT(shown.size(), 300u) << shown;  // a key from outside is shown cut
}

TEST(JsonRecord, NeverThrowsOnArbitraryText) {
  std::string s;
  for (int i = 0; i < 3000; ++i) {
    s.push_back(static_cast<char>((i * 7919) % 256));
    EXPECT_NO_THROW((void)ParseRecord<Outer>(s, "bytes"));
  }
  for (const char* text : {"{\"inner\": {\"small\": 1e999}}", "{\"items\": [[[]]]}", "{\"series\": []}",
                           "{\"rank\": -0}", "{\"text\": \"\\ud800\"}", "nul", "{\"a\":1,}"}) {
    EXPECT_NO_THROW((void)ParseRecord<Outer>(std::string(text), "odd")) << text;
  }
}

TEST(JsonParse, GarbageIsAStatusNamingWhatWasRead) {
  struct Case {
    std::string text, mentions;
  };
  for (const Case& c : std::vector<Case>{{"", "answer: empty"},
                                         {" \n\t", "answer: empty"},
                                         {"<!DOCTYPE html><html>", "answer: not JSON ("},
                                         {"<!DOCTYPE html><html>", "starting '<!DOCTYPE html><html>'"},
                                         {"{\"a\": 1", "answer: not JSON"},
                                         {"{\"a\": \"\xff\"}", "answer: not JSON"},
                                         {"{} {}", "answer: not JSON"},
                                         {std::string(100, '[') + std::string(100, ']'), "nested deeper than 64"}}) {
    Result<nlohmann::json> j = ParseJson(c.text, "answer");
    ASSERT_FALSE(j.ok()) << c.text;
    EXPECT_EQ(j.status().code(), StatusCode::kCorruption);
    EXPECT_NE(j.status().message().find(c.mentions), std::string::npos) << j.status().message();
    EXPECT_EQ(j.status().message().find("[json.exception"), std::string::npos) << j.status().message();
  }
  EXPECT_FALSE(ParseJson("[[[1]]]", "shallow", 2).ok());
  auto ok = ParseJson(" {\"a\": [1, {\"b\": null}]} ", "fine");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ((*ok)["a"][0], 1);
  // Brackets inside strings are not nesting.
  EXPECT_TRUE(ParseJson("{\"s\": \"" + std::string(200, '[') + "\\\"\"}", "strings").ok());
}

TEST(JsonStrictReader, EveryFieldIsRequiredAndTheFirstErrorSticks) {
  const nlohmann::json j = nlohmann::json::parse(
      R"({"n": 5, "s": "x", "big": 18446744073709551615, "obj": {"k": [1, {"deep": "v"}]}})");
  StrictReader r(j, "file.json");
  EXPECT_EQ(r.Int("n"), 5);
  EXPECT_EQ(r.Str("s"), "x");
  EXPECT_EQ(r.IntIn("n", 0, 10), 5);
  EXPECT_TRUE(r.ok());
  StrictReader obj = r.Sub("obj", nlohmann::json::value_t::object, "an object");
  StrictReader list = obj.Sub("k", nlohmann::json::value_t::array, "an array");
  ASSERT_EQ(list.size(), 2u);
  StrictReader elem = list.At(1);
  EXPECT_EQ(elem.Str("deep"), "v");
  EXPECT_EQ(elem.Int("deep"), 0);
  EXPECT_EQ(elem.status().message(), "file.json: field 'obj.k[1].deep': expected an integer, got a string (\"v\")");
  StrictReader first = list.At(0);
  EXPECT_EQ(first.Str("x"), "");
  EXPECT_EQ(first.status().message(), "file.json: field 'obj.k[0].x': missing");

  EXPECT_EQ(r.IntIn("n", 6, 9), 5);
  EXPECT_EQ(r.status().message(), "file.json: field 'n': 5 is out of range: expected an integer in [6, 9]");
  r.Error("s", "a later error");  // the first one sticks
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("field 'n'"), std::string::npos);

  StrictReader big(j, "file.json");
  EXPECT_EQ(big.Int("big"), 0);
  EXPECT_NE(big.status().message().find("does not fit a signed 64-bit integer"), std::string::npos);
  StrictReader missing(j, "file.json");
  (void)missing.Str("nope");
  EXPECT_EQ(missing.status().message(), "file.json: field 'nope': missing");
}

TEST(JsonLenient, MissingOrWrongTypedFieldsGiveTheDefault) {
  const nlohmann::json j = nlohmann::json::parse(
      R"({"f":1e300,"n":-1e300,"s":"x","u":18446744073709551615,"i":-3,"d":2.9,"a":[1],"z":null,"b":true})");
  EXPECT_EQ(LenientInteger(j, "f", -1), -1);
  EXPECT_EQ(LenientInteger(j, "u", -1), -1);
  EXPECT_EQ(LenientInteger(j, "i", 0), -3);
  EXPECT_EQ(LenientInteger(j, "d", 0), 2);
  EXPECT_EQ(LenientInteger(j, "b", 7), 7);
  EXPECT_EQ(LenientInteger(j, "missing", 7), 7);
  EXPECT_EQ(LenientInteger(j, "n", -1), -1);
  EXPECT_EQ(LenientInteger(j, "s", -1), -1);
  EXPECT_EQ(LenientNumber(j, "a", 4.0), 4.0);
  EXPECT_EQ(LenientNumber(j, "i"), -3.0);
  EXPECT_EQ(LenientNumber(j, "s", 4.0), 4.0);
  EXPECT_EQ(LenientNumber(j, "z", 4.0), 4.0);
  EXPECT_EQ(LenientNumber(j, "missing"), 0.0);
  EXPECT_EQ(LenientString(j, "s"), "x");
  EXPECT_EQ(LenientString(j, "i"), "");
  EXPECT_EQ(LenientString(j, "a", "def"), "def");
  for (const nlohmann::json& not_object : {nlohmann::json::array(), nlohmann::json("str"), nlohmann::json(),
                                           nlohmann::json(5)}) {
    EXPECT_EQ(LenientInteger(not_object, "i", 9), 9);
    EXPECT_EQ(LenientNumber(not_object, "i", 9.5), 9.5);
    EXPECT_EQ(LenientString(not_object, "i", "d"), "d");
  }
}

}  // namespace
}  // namespace elastrain
