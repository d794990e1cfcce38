// The byte-pair merge both BPE tokenizers share (bpe_tokenizer.cpp), and the per-thread
// cache of encoded pieces. Internal to data/.
//
// A piece of n bytes starts as n symbols; the adjacent pair of lowest rank (leftmost on
// ties) merges, again and again, until no adjacent pair has a rank. A heap of candidate
// pairs, invalidated lazily, makes that O(n log n) instead of tiktoken's O(n^2) rescans,
// so one hostile piece (megabytes of letters without a space) cannot stall Encode.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace elastrain::bpe {

struct Merge {
  int32_t rank;    // lower merges first
  int32_t merged;  // the id of the merged symbol
};

struct Symbol {
  uint32_t end;    // the symbol covers piece bytes [its index, end); its index is its start
  int32_t id;
  int32_t prev;    // index of the symbol before, -1 at the start
  int32_t next;    // index of the symbol after, -1 at the end
};

// A candidate merge: the pair as it was when pushed (symbols only grow, so a changed end
// marks it stale).
struct Candidate {
  int32_t rank, left;
  uint32_t left_end, right_end;
  int32_t merged;
  // The heap's top is the lowest rank, then the leftmost pair.
  bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
};

// Reused across pieces, so a piece costs no allocation once the buffers have grown.
struct Scratch {
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

// Merges `piece` (its bytes have ids initial(byte)); pair(left index, left, right) gives the
// Merge of two adjacent symbols or nullopt. Appends the final symbols' ids to `out`.
template <typename InitialFn, typename PairFn>
void MergePiece(std::string_view piece, InitialFn initial, PairFn pair, Scratch* scratch, std::vector<int32_t>* out) {
  const int32_t n = static_cast<int32_t>(piece.size());
  std::vector<Symbol>& s = scratch->symbols;
  std::vector<Candidate>& heap = scratch->heap;
  s.resize(n);
  heap.clear();
  for (int32_t i = 0; i < n; ++i)
    s[i] = Symbol{static_cast<uint32_t>(i + 1), initial(static_cast<unsigned char>(piece[i])), i - 1,
                  i + 1 < n ? i + 1 : -1};
  auto candidate = [&](int32_t left) -> bool {
    if (left < 0 || s[left].next < 0) return false;
    const Symbol& l = s[left];
    const Symbol& r = s[l.next];
    std::optional<Merge> m = pair(left, l, r);
    if (!m) return false;
    heap.push_back(Candidate{m->rank, left, l.end, r.end, m->merged});
    return true;
  };
  for (int32_t i = 0; i + 1 < n; ++i) candidate(i);
  std::make_heap(heap.begin(), heap.end());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& l = s[c.left];
    if (l.id < 0 || l.end != c.left_end || l.next < 0 || s[l.next].end != c.right_end) continue;  // stale
    Symbol& r = s[l.next];
    l.end = r.end;
    l.id = c.merged;
    l.next = r.next;
    if (r.next >= 0) s[r.next].prev = c.left;
    r.id = -1;
    if (candidate(l.prev)) std::push_heap(heap.begin(), heap.end());
    if (candidate(c.left)) std::push_heap(heap.begin(), heap.end());
  }
  for (int32_t i = 0; i >= 0 && i < n; i = s[i].next) out->push_back(s[i].id);
}

// A thread's cache of encoded pieces for one tokenizer at a time (words repeat: most of a
// corpus's pieces are cache hits). Keyed by the tokenizer's serial, never reused, so a
// destroyed tokenizer's entries are never served to a new one at the same address.
class PieceCache {
 public:
  static constexpr size_t kMaxPieceBytes = 64;
  static constexpr size_t kMaxEntries = size_t{1} << 17;
  static uint64_t NewSerial() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1);
  }
  // The cached ids of `piece` for tokenizer `serial`, or null.
  static const std::vector<int32_t>* Find(uint64_t serial, std::string_view piece) {
    State& st = Get(serial);
    auto it = st.map.find(piece);
    return it == st.map.end() ? nullptr : &it->second;
  }
  static void Put(uint64_t serial, std::string_view piece, const int32_t* ids, size_t count) {
    if (piece.size() > kMaxPieceBytes) return;
    State& st = Get(serial);
    if (st.map.size() >= kMaxEntries) st.map.clear();
    st.map.emplace(std::string(piece), std::vector<int32_t>(ids, ids + count));
  }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct State {
    uint64_t serial = 0;
    std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> map;
  };
  static State& Get(uint64_t serial) {
    thread_local State st;
    if (st.serial != serial) {
      st.map.clear();
      st.serial = serial;
    }
    return st;
  }
};

}  // namespace elastrain::bpe
