// Reed-Solomon erasure code over GF(2^8) (ISA-L), systematic, with a Cauchy generator matrix whose
// columns are scaled so that the first parity row is all ones (that parity is the XOR of the data).
//
// A stripe has n = k + m fragments of equal length: fragments 0..k-1 are data, k..n-1 parity.
// Any k of the n fragments determine the other m (every square submatrix of a Cauchy matrix is
// invertible, and scaling its columns by nonzero factors keeps it so), so up to m simultaneous
// erasures are recovered bit-exactly.
//
// Two-phase, as ISA-L itself: the constructor builds the generator matrix and the encode tables
// once; decode tables are built once per erasure pattern (DecodePlan, cached in the Codec). The
// hot calls (encode, update, decode) take spans in and spans out and never allocate, except the
// first decode of a new erasure pattern, which builds and caches its plan.
//
// Every operation is bytewise: byte i of a parity fragment depends only on byte i of the data
// fragments. So any byte range [off, off+len) of a stripe can be encoded, updated or decoded on
// its own by passing the same subspan of every fragment (degraded reads of a single row).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace resil::ec {

using Bytes = std::span<std::byte>;
using ConstBytes = std::span<const std::byte>;

/// Decode tables for one erasure pattern: reconstructs `targets()` from `sources()`.
/// Immutable once built, so one plan may be used from several threads at once.
class DecodePlan {
public:
  /// The k fragment indices decode reads, ascending; pass their spans in this order.
  std::span<const int> sources() const noexcept { return sources_; }
  /// The fragment indices decode writes, ascending.
  std::span<const int> targets() const noexcept { return targets_; }

private:
  friend class Codec;
  std::vector<int> sources_, targets_;
  std::vector<unsigned char> tables_;  // ec_init_tables output, 32 * k * targets bytes
};

class Codec {
public:
  /// k data and m parity fragments per stripe: 1 <= k, 1 <= m, k + m <= 256 (GF(2^8)).
  /// Throws UsageError otherwise.
  Codec(int k, int m);
  ~Codec();
  Codec(Codec&&) noexcept;
  Codec& operator=(Codec&&) noexcept;
  Codec(const Codec&) = delete;
  Codec& operator=(const Codec&) = delete;

  int k() const noexcept { return k_; }
  int m() const noexcept { return m_; }
  int n() const noexcept { return k_ + m_; }

  /// The n x k generator matrix, row-major: identity on top, Cauchy rows 1/(i xor j) below with
  /// column j multiplied by (k xor j), which makes row k all ones.
  std::span<const unsigned char> matrix() const noexcept { return matrix_; }

  /// parity[j] = sum_i matrix[k + j][i] * data[i] over GF(2^8), for all j < m.
  /// k data spans and m parity spans, all of one length; parity must not overlap data.
  void encode(std::span<const ConstBytes> data, std::span<const Bytes> parity) const;

  /// Fold a change of data fragment `fragment` into the parity: `delta` is old XOR new of that
  /// fragment's bytes [offset, offset + delta.size()); parity[j] bytes of the same range are
  /// XORed with matrix[k + j][fragment] * delta. Deltas commute, and applying one twice cancels
  /// it (XOR), which is why the exactly-once DeltaLedger exists.
  void update(int fragment, std::size_t offset, ConstBytes delta, std::span<const Bytes> parity) const;

  /// One parity holder's share of encode/update: parity fragment k + j only (0 <= j < m), e.g.
  /// on the rank that stores just that member of the stripe. Same rules as encode/update.
  void encode_row(int j, std::span<const ConstBytes> data, Bytes parity_j) const;
  /// update_row(0, ...) is a plain XOR (row k is all ones), the common m = 1 case.
  void update_row(int j, int fragment, std::size_t offset, ConstBytes delta, Bytes parity_j) const;

  /// The cached plan recovering `erased` (any order, no repeats, at most m) from the k lowest
  /// surviving fragment indices. Throws DataLossError when more than m are erased, UsageError
  /// for a bad index. Thread-safe.
  const DecodePlan& plan(std::span<const int> erased) const;
  /// As above, reading the k given surviving fragments instead (any k distinct indices not erased).
  const DecodePlan& plan(std::span<const int> erased, std::span<const int> sources) const;

  /// Reconstruct: sources in plan.sources() order, out in plan.targets() order, one length.
  void decode(const DecodePlan& plan, std::span<const ConstBytes> sources, std::span<const Bytes> out) const;
  /// Reconstruct `erased` from the k lowest surviving fragments (ascending index order, as
  /// plan(erased).sources()); out[i] receives fragment erased[i].
  void decode(std::span<const int> erased, std::span<const ConstBytes> sources, std::span<const Bytes> out) const;

  /// Number of decode plans built so far (one per distinct pattern).
  std::size_t cached_plans() const;

private:
  struct Cache;
  int k_, m_;
  std::vector<unsigned char> matrix_;         // n x k
  std::vector<unsigned char> parity_tables_;  // ec_init_tables of the m parity rows
  std::unique_ptr<Cache> cache_;
};

/// out = a XOR b (out may alias a or b). All three of one length; throws UsageError otherwise.
void xor_delta(ConstBytes a, ConstBytes b, Bytes out);

}  // namespace resil::ec
