#include "resil/ec/codec.hpp"

#include <isa-l/erasure_code.h>

#include <algorithm>
#include <array>
#include <bitset>
#include <climits>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "resil/core/error.hpp"

namespace resil::ec {

namespace {

constexpr int kMaxFragments = 256;  // GF(2^8): Cauchy points i xor j must stay distinct bytes
// ISA-L takes an int length; larger spans are processed in chunks of this many bytes.
constexpr std::size_t kChunk = std::size_t{1} << 30;

using Ptrs = std::array<unsigned char*, kMaxFragments>;

unsigned char* ptr(ConstBytes s) noexcept {
  // ISA-L's source arguments are not const-qualified but are only read.
  return reinterpret_cast<unsigned char*>(const_cast<std::byte*>(s.data()));
}
unsigned char* ptr(Bytes s) noexcept { return reinterpret_cast<unsigned char*>(s.data()); }

std::string code_name(int k, int m) { return "(k=" + std::to_string(k) + ", m=" + std::to_string(m) + ")"; }

template <class Span>
std::size_t common_length(const char* where, const char* what, std::span<const Span> spans, std::size_t len) {
  for (std::size_t i = 0; i < spans.size(); ++i) {
    if (spans[i].size() != len) {
      throw UsageError(std::string(where) + ": " + what + " " + std::to_string(i) + " has " +
                       std::to_string(spans[i].size()) + " bytes, expected " + std::to_string(len));
    }
  }
  return len;
}

std::string list_text(std::span<const int> v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return "{" + s + "}";
}

struct Key {
  std::bitset<kMaxFragments> src, tgt;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  std::size_t operator()(const Key& key) const noexcept {
    const std::hash<std::bitset<kMaxFragments>> h;
    return h(key.src) * 0x9E3779B97F4A7C15ull ^ h(key.tgt);
  }
};

}  // namespace

struct Codec::Cache {
  std::mutex mu;
  std::unordered_map<Key, std::unique_ptr<DecodePlan>, KeyHash> plans;
};

Codec::Codec(int k, int m) : k_(k), m_(m) {
  if (k < 1 || m < 1 || k + m > kMaxFragments) {
    throw UsageError("ec::Codec: need 1 <= k, 1 <= m and k + m <= 256 for GF(2^8), got " + code_name(k, m));
  }
  matrix_.resize(static_cast<std::size_t>(n()) * k_);
  gf_gen_cauchy1_matrix(matrix_.data(), n(), k_);
  // Scale column i of the parity rows by 1 / g[k][i]: the first parity row becomes all ones (a plain
  // XOR parity, so update_row(0, ...) is an XOR), and every square submatrix of the parity rows is
  // the Cauchy one's times nonzero column factors, so still invertible: the code stays MDS.
  for (int i = 0; i < k_; ++i) {
    const unsigned char inv = gf_inv(matrix_[static_cast<std::size_t>(k_) * k_ + i]);
    for (int j = k_; j < n(); ++j) {
      auto& g = matrix_[static_cast<std::size_t>(j) * k_ + i];
      g = gf_mul(g, inv);
    }
  }
  parity_tables_.resize(32u * static_cast<std::size_t>(k_) * m_);
  ec_init_tables(k_, m_, matrix_.data() + static_cast<std::size_t>(k_) * k_, parity_tables_.data());
  cache_ = std::make_unique<Cache>();
}

Codec::~Codec() = default;
Codec::Codec(Codec&&) noexcept = default;
Codec& Codec::operator=(Codec&&) noexcept = default;

void Codec::encode(std::span<const ConstBytes> data, std::span<const Bytes> parity) const {
  if (data.size() != static_cast<std::size_t>(k_) || parity.size() != static_cast<std::size_t>(m_)) {
    throw UsageError("ec::Codec::encode " + code_name(k_, m_) + ": got " + std::to_string(data.size()) +
                     " data and " + std::to_string(parity.size()) + " parity fragments");
  }
  const std::size_t len = common_length("ec::Codec::encode", "data fragment", data, data[0].size());
  common_length("ec::Codec::encode", "parity fragment", parity, len);
  for (std::size_t off = 0; off < len; off += kChunk) {
    const std::size_t c = std::min(kChunk, len - off);
    Ptrs in{}, out{};
    for (int i = 0; i < k_; ++i) in[i] = ptr(data[i]) + off;
    for (int j = 0; j < m_; ++j) out[j] = ptr(parity[j]) + off;
    ec_encode_data(static_cast<int>(c), k_, m_, const_cast<unsigned char*>(parity_tables_.data()), in.data(),
                   out.data());
  }
}

void Codec::update(int fragment, std::size_t offset, ConstBytes delta, std::span<const Bytes> parity) const {
  if (fragment < 0 || fragment >= k_) {
    throw UsageError("ec::Codec::update " + code_name(k_, m_) + ": data fragment index " +
                     std::to_string(fragment) + " out of range [0, " + std::to_string(k_) + ")");
  }
  if (parity.size() != static_cast<std::size_t>(m_)) {
    throw UsageError("ec::Codec::update " + code_name(k_, m_) + ": got " + std::to_string(parity.size()) +
                     " parity fragments");
  }
  for (int j = 0; j < m_; ++j) {
    if (offset > parity[j].size() || delta.size() > parity[j].size() - offset) {
      throw UsageError("ec::Codec::update: delta [" + std::to_string(offset) + ", " +
                       std::to_string(offset + delta.size()) + ") of fragment " + std::to_string(fragment) +
                       " exceeds parity fragment " + std::to_string(j) + " of " +
                       std::to_string(parity[j].size()) + " bytes");
    }
  }
  for (std::size_t off = 0; off < delta.size(); off += kChunk) {
    const std::size_t c = std::min(kChunk, delta.size() - off);
    Ptrs out{};
    for (int j = 0; j < m_; ++j) out[j] = ptr(parity[j]) + offset + off;
    ec_encode_data_update(static_cast<int>(c), k_, m_, fragment, const_cast<unsigned char*>(parity_tables_.data()),
                          ptr(delta) + off, out.data());
  }
}

void Codec::encode_row(int j, std::span<const ConstBytes> data, Bytes parity_j) const {
  if (j < 0 || j >= m_ || data.size() != static_cast<std::size_t>(k_)) {
    throw UsageError("ec::Codec::encode_row " + code_name(k_, m_) + ": parity row " + std::to_string(j) + " with " +
                     std::to_string(data.size()) + " data fragments");
  }
  const std::size_t len = common_length("ec::Codec::encode_row", "data fragment", data, parity_j.size());
  const unsigned char* tables = parity_tables_.data() + 32u * static_cast<std::size_t>(k_) * static_cast<std::size_t>(j);
  for (std::size_t off = 0; off < len; off += kChunk) {
    const std::size_t c = std::min(kChunk, len - off);
    Ptrs in{};
    for (int i = 0; i < k_; ++i) in[i] = ptr(data[i]) + off;
    unsigned char* out = ptr(parity_j) + off;
    ec_encode_data(static_cast<int>(c), k_, 1, const_cast<unsigned char*>(tables), in.data(), &out);
  }
}

void Codec::update_row(int j, int fragment, std::size_t offset, ConstBytes delta, Bytes parity_j) const {
  if (j < 0 || j >= m_ || fragment < 0 || fragment >= k_) {
    throw UsageError("ec::Codec::update_row " + code_name(k_, m_) + ": parity row " + std::to_string(j) +
                     ", data fragment " + std::to_string(fragment) + " out of range");
  }
  if (offset > parity_j.size() || delta.size() > parity_j.size() - offset) {
    throw UsageError("ec::Codec::update_row: delta [" + std::to_string(offset) + ", " +
                     std::to_string(offset + delta.size()) + ") of fragment " + std::to_string(fragment) +
                     " exceeds parity fragment " + std::to_string(j) + " of " + std::to_string(parity_j.size()) +
                     " bytes");
  }
  if (j == 0) {  // the all-ones row: g[k][fragment] * delta is delta itself
    const Bytes dst = parity_j.subspan(offset, delta.size());
    xor_delta(dst, delta, dst);
    return;
  }
  const unsigned char* tables = parity_tables_.data() + 32u * static_cast<std::size_t>(k_) * static_cast<std::size_t>(j);
  for (std::size_t off = 0; off < delta.size(); off += kChunk) {
    const std::size_t c = std::min(kChunk, delta.size() - off);
    unsigned char* out = ptr(parity_j) + offset + off;
    ec_encode_data_update(static_cast<int>(c), k_, 1, fragment, const_cast<unsigned char*>(tables), ptr(delta) + off,
                          &out);
  }
}

const DecodePlan& Codec::plan(std::span<const int> erased) const {
  std::bitset<kMaxFragments> lost;
  for (int e : erased) {
    if (e >= 0 && e < n()) lost.set(static_cast<std::size_t>(e));
  }
  std::array<int, kMaxFragments> src{};
  int count = 0;
  for (int i = 0; i < n() && count < k_; ++i) {
    if (!lost.test(static_cast<std::size_t>(i))) src[count++] = i;
  }
  // With more than m erasures fewer than k survive; the two-argument plan reports it.
  return plan(erased, std::span<const int>(src.data(), static_cast<std::size_t>(count)));
}

const DecodePlan& Codec::plan(std::span<const int> erased, std::span<const int> sources) const {
  // Built only on the error path: the hot path must not allocate.
  const auto where = [&] { return "ec::Codec::decode " + code_name(k_, m_); };
  Key key;
  for (int e : erased) {
    if (e < 0 || e >= n()) {
      throw UsageError(where() + ": erased fragment index " + std::to_string(e) + " out of range [0, " +
                       std::to_string(n()) + ")");
    }
    if (key.tgt.test(static_cast<std::size_t>(e))) {
      throw UsageError(where() + ": erased fragment " + std::to_string(e) + " listed twice in " + list_text(erased));
    }
    key.tgt.set(static_cast<std::size_t>(e));
  }
  if (erased.size() > static_cast<std::size_t>(m_)) {
    throw DataLossError(where() + ": " + std::to_string(erased.size()) + " fragments lost " + list_text(erased) +
                        ", the code tolerates at most " + std::to_string(m_));
  }
  if (sources.size() != static_cast<std::size_t>(k_)) {
    throw UsageError(where() + ": decoding reads exactly k=" + std::to_string(k_) + " surviving fragments, got " +
                     list_text(sources));
  }
  for (int s : sources) {
    if (s < 0 || s >= n() || key.tgt.test(static_cast<std::size_t>(s)) || key.src.test(static_cast<std::size_t>(s))) {
      throw UsageError(where() + ": source fragments " + list_text(sources) +
                       " must be distinct, in range and not erased " + list_text(erased));
    }
    key.src.set(static_cast<std::size_t>(s));
  }

  std::lock_guard lock(cache_->mu);
  auto it = cache_->plans.find(key);
  if (it != cache_->plans.end()) return *it->second;

  auto p = std::make_unique<DecodePlan>();
  for (int i = 0; i < n(); ++i) {
    if (key.src.test(static_cast<std::size_t>(i))) p->sources_.push_back(i);
    if (key.tgt.test(static_cast<std::size_t>(i))) p->targets_.push_back(i);
  }
  // The survivors are B * data, with B the generator rows of the sources; so data = B^-1 *
  // survivors and any fragment t = matrix[t] * B^-1 * survivors.
  const auto ku = static_cast<std::size_t>(k_);
  std::vector<unsigned char> b(ku * ku), binv(ku * ku);
  for (std::size_t r = 0; r < ku; ++r) {
    std::copy_n(matrix_.begin() + static_cast<std::ptrdiff_t>(p->sources_[r] * ku), ku, b.begin() + static_cast<std::ptrdiff_t>(r * ku));
  }
  if (gf_invert_matrix(b.data(), binv.data(), k_) != 0) {
    throw EcError(where() + ": generator rows of sources " + list_text(p->sources_) + " are singular (a bug)");
  }
  std::vector<unsigned char> rows(p->targets_.size() * ku, 0);
  for (std::size_t t = 0; t < p->targets_.size(); ++t) {
    const unsigned char* g = matrix_.data() + static_cast<std::size_t>(p->targets_[t]) * ku;
    for (std::size_t j = 0; j < ku; ++j) {
      unsigned char acc = 0;
      for (std::size_t i = 0; i < ku; ++i) acc ^= gf_mul(g[i], binv[i * ku + j]);
      rows[t * ku + j] = acc;
    }
  }
  p->tables_.resize(32 * ku * p->targets_.size());
  if (!p->targets_.empty()) ec_init_tables(k_, static_cast<int>(p->targets_.size()), rows.data(), p->tables_.data());
  return *cache_->plans.emplace(key, std::move(p)).first->second;
}

void Codec::decode(const DecodePlan& plan, std::span<const ConstBytes> sources, std::span<const Bytes> out) const {
  const std::string_view where = "ec::Codec::decode";
  if (sources.size() != plan.sources_.size() || out.size() != plan.targets_.size()) {
    throw UsageError(std::string(where) + ": the plan reads " + std::to_string(plan.sources_.size()) +
                     " and writes " + std::to_string(plan.targets_.size()) + " fragments, got " +
                     std::to_string(sources.size()) + " and " + std::to_string(out.size()) + " spans");
  }
  if (out.empty()) return;
  const std::size_t len = common_length(where.data(), "source", sources, sources[0].size());
  common_length(where.data(), "output", out, len);
  const int rows = static_cast<int>(out.size());
  for (std::size_t off = 0; off < len; off += kChunk) {
    const std::size_t c = std::min(kChunk, len - off);
    Ptrs in{}, dst{};
    for (int i = 0; i < k_; ++i) in[i] = ptr(sources[i]) + off;
    for (int j = 0; j < rows; ++j) dst[j] = ptr(out[j]) + off;
    ec_encode_data(static_cast<int>(c), k_, rows, const_cast<unsigned char*>(plan.tables_.data()), in.data(),
                   dst.data());
  }
}

void Codec::decode(std::span<const int> erased, std::span<const ConstBytes> sources, std::span<const Bytes> out) const {
  const DecodePlan& p = plan(erased);
  if (out.size() != erased.size()) {
    throw UsageError("ec::Codec::decode: " + std::to_string(erased.size()) + " erased fragments but " +
                     std::to_string(out.size()) + " output spans");
  }
  // The plan writes its targets in ascending order; route each to the caller's slot.
  std::array<Bytes, kMaxFragments> sorted{};
  for (std::size_t t = 0; t < p.targets_.size(); ++t) {
    const auto at = std::find(erased.begin(), erased.end(), p.targets_[t]) - erased.begin();
    sorted[t] = out[static_cast<std::size_t>(at)];
  }
  decode(p, sources, std::span<const Bytes>(sorted.data(), p.targets_.size()));
}

std::size_t Codec::cached_plans() const {
  std::lock_guard lock(cache_->mu);
  return cache_->plans.size();
}

namespace {
// 32 bytes per step as a GCC vector: one AVX2 XOR in the avx2 clone, two SSE2 XORs in the default
// one (the loads and stores through memcpy allow `out` to be `a`, as in-place parity updates are).
typedef unsigned char Block32 __attribute__((vector_size(32)));

__attribute__((target_clones("avx2", "default"))) void xor_bytes(const std::byte* a, const std::byte* b, std::byte* out,
                                                                   std::size_t n) {
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    Block32 x, y;
    std::memcpy(&x, a + i, 32);
    std::memcpy(&y, b + i, 32);
    x ^= y;
    std::memcpy(out + i, &x, 32);
  }
  for (; i < n; ++i) out[i] = a[i] ^ b[i];
}
}  // namespace

void xor_delta(ConstBytes a, ConstBytes b, Bytes out) {
  if (a.size() != b.size() || a.size() != out.size()) {
    throw UsageError("ec::xor_delta: lengths differ (" + std::to_string(a.size()) + ", " + std::to_string(b.size()) +
                     ", " + std::to_string(out.size()) + ")");
  }
  xor_bytes(a.data(), b.data(), out.data(), a.size());
}

}  // namespace resil::ec
