// check_samples RUN_DIR STEPS: checks that a run consumed every sample exactly once per
// epoch across failures and resizes, from the records of record_consumed_samples=1
// (<run>/samples/rank_<r>.jsonl: generation, step, shard, shards, tensor_rank,
// num_samples, indices -- written when a rank reads its share of a step).
//
// A step's effective records are those of the newest generation that trained it (an
// older generation that read it but failed before finishing was redone). For each
// step 0..STEPS-1: that generation's shards 0..shards-1 each appear exactly once (tensor
// rank 0); their concatenation is the global batch. The global batches in step order
// form the sample stream: every complete epoch of num_samples is a permutation of
// [0, num_samples), and the partial last one has no repeat. Prints one summary line
// (steps, generations, world sizes seen, steps read more than once) and exits 0 when
// all holds, 1 otherwise, naming the first problem.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace {
struct Share {
  int64_t shards = 0;
  std::vector<int64_t> indices;
};
// step -> generation -> shard -> shares seen (more than one: a duplicate)
using Records = std::map<int64_t, std::map<int64_t, std::map<int64_t, std::vector<Share>>>>;

int Fail(const std::string& why) {
  std::printf("FAIL: %s\n", why.c_str());
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: check_samples RUN_DIR STEPS\n");
    return 2;
  }
  const fs::path dir = fs::path(argv[1]) / "samples";
  const int64_t steps = std::stoll(argv[2]);
  Records rec;
  int64_t num_samples = -1;
  size_t files = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::ifstream in(e.path());
    ++files;
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_object()) return Fail(e.path().string() + ": a line that is not JSON: " + line.substr(0, 80));
      if (j.value("tensor_rank", 0) != 0) continue;  // tensor peers read the same rows
      num_samples = j.at("num_samples").get<int64_t>();
      Share s{j.at("shards").get<int64_t>(), j.at("indices").get<std::vector<int64_t>>()};
      rec[j.at("step").get<int64_t>()][j.at("generation").get<int64_t>()][j.at("shard").get<int64_t>()].push_back(s);
    }
  }
  if (files == 0) return Fail("no sample records in " + dir.string());
  std::vector<int64_t> stream;
  std::set<int64_t> generations, worlds;
  int64_t reread = 0;
  for (int64_t step = 0; step < steps; ++step) {
    auto it = rec.find(step);
    if (it == rec.end()) return Fail("step " + std::to_string(step) + " was never trained");
    if (it->second.size() > 1) ++reread;
    const auto& [gen, shares] = *it->second.rbegin();
    generations.insert(gen);
    const int64_t shards = shares.begin()->second.front().shards;
    worlds.insert(shards);
    if (static_cast<int64_t>(shares.size()) != shards)
      return Fail("step " + std::to_string(step) + " generation " + std::to_string(gen) + ": " +
                  std::to_string(shares.size()) + " of " + std::to_string(shards) + " shards recorded");
    for (int64_t sh = 0; sh < shards; ++sh) {
      auto s = shares.find(sh);
      if (s == shares.end()) return Fail("step " + std::to_string(step) + ": shard " + std::to_string(sh) + " missing");
      if (s->second.size() != 1)
        return Fail("step " + std::to_string(step) + " generation " + std::to_string(gen) + ": shard " +
                    std::to_string(sh) + " read " + std::to_string(s->second.size()) + " times");
      stream.insert(stream.end(), s->second.front().indices.begin(), s->second.front().indices.end());
    }
  }
  for (size_t begin = 0; begin < stream.size(); begin += num_samples) {
    const size_t end = std::min(stream.size(), begin + static_cast<size_t>(num_samples));
    std::set<int64_t> seen;
    for (size_t i = begin; i < end; ++i) {
      if (stream[i] < 0 || stream[i] >= num_samples) return Fail("sample index " + std::to_string(stream[i]) + " out of range");
      if (!seen.insert(stream[i]).second)
        return Fail("epoch " + std::to_string(begin / num_samples) + ": sample " + std::to_string(stream[i]) +
                    " consumed twice");
    }
  }
  std::string ws;
  for (int64_t w : worlds) ws += (ws.empty() ? "" : ",") + std::to_string(w);
  std::printf("%lld steps, %zu samples (%zu epochs of %lld) each consumed once per epoch; generations used %zu, "
              "batch shards {%s}; steps read by more than one generation: %lld\n",
              static_cast<long long>(steps), stream.size(), (stream.size() + num_samples - 1) / num_samples,
              static_cast<long long>(num_samples), generations.size(), ws.c_str(), static_cast<long long>(reread));
  return 0;
}
