// Codec throughput on one core: encode, update (XOR delta of a full fragment, and of single
// 256-byte rows as ec-train sends them) and decode of 1 and m erasures, against memcpy of the
// same bytes measured in the same run. Bytes counted: the data bytes an operation covers
// (k fragments for encode/decode, the delta for update), as ISA-L's own benchmarks do. A parity
// holder's update of a whole fragment compares the first parity row's XOR (ec::xor_delta) with the
// second row's ISA-L multiply path.
//
//   bench_ec_codec [--fragment BYTES] [--seconds S]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <isa-l/crc.h>

#include "resil/core/rng.hpp"
#include "resil/ec/codec.hpp"

using namespace resil;
using Clock = std::chrono::steady_clock;

namespace {

double g_seconds = 0.3;

// Best-of-3 rate in GB/s of `op`, each measurement repeating it for at least g_seconds.
template <class Op>
double rate(std::size_t bytes_per_call, Op&& op) {
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::size_t calls = 0;
    const auto t0 = Clock::now();
    double elapsed = 0;
    do {
      for (int i = 0; i < 8; ++i) op();
      calls += 8;
      elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (elapsed < g_seconds);
    best = std::max(best, static_cast<double>(bytes_per_call) * static_cast<double>(calls) / elapsed / 1e9);
  }
  return best;
}

struct Stripe {
  std::vector<std::vector<std::byte>> frags;
  Stripe(int n, std::size_t len, std::uint64_t seed) : frags(static_cast<std::size_t>(n), std::vector<std::byte>(len)) {
    Rng rng(seed, 0);
    for (auto& f : frags)
      for (auto& b : f) b = static_cast<std::byte>(rng() & 0xFF);
  }
  std::vector<ec::ConstBytes> in(int first, int count) const {
    std::vector<ec::ConstBytes> v;
    for (int i = first; i < first + count; ++i) v.emplace_back(frags[static_cast<std::size_t>(i)]);
    return v;
  }
  std::vector<ec::Bytes> out(int first, int count) {
    std::vector<ec::Bytes> v;
    for (int i = first; i < first + count; ++i) v.emplace_back(frags[static_cast<std::size_t>(i)]);
    return v;
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::size_t frag = 1 << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--fragment") frag = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--seconds") g_seconds = std::strtod(argv[i + 1], nullptr);
    else {
      std::fprintf(stderr, "bench_ec_codec: error: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  constexpr std::size_t row = 256;  // one fp32 row of dim 64
  std::printf("libec codec, one core, fragment %zu bytes; GB/s of data covered, ratio = GB/s / memcpy GB/s\n", frag);
  std::printf("%-4s %-4s %-22s %10s %8s\n", "k", "m", "operation", "GB/s", "ratio");
  bool verified = true;  // decoded bytes must equal the originals, or the rates mean nothing
  const int pairs[][2] = {{2, 1}, {4, 1}, {4, 2}, {6, 3}, {10, 4}};
  for (const auto& km : pairs) {
    const int k = km[0], m = km[1];
    const ec::Codec codec(k, m);
    Stripe s(k + m, frag, static_cast<std::uint64_t>(k * 16 + m));
    Stripe copy(k, frag, 1);

    // Baseline: memcpy of the same k fragments, same run, same buffers' sizes.
    const double mc = rate(frag * static_cast<std::size_t>(k), [&] {
      for (int i = 0; i < k; ++i)
        std::memcpy(copy.frags[static_cast<std::size_t>(i)].data(), s.frags[static_cast<std::size_t>(i)].data(), frag);
    });
    const auto data = s.in(0, k);
    const auto parity = s.out(k, m);
    const double enc = rate(frag * static_cast<std::size_t>(k), [&] { codec.encode(data, parity); });
    const ec::ConstBytes delta(s.frags[0]);
    const double upd = rate(frag, [&] { codec.update(1, 0, delta, parity); });
    std::size_t off = 0;
    const double upd_row = rate(row, [&] {
      codec.update(1, off, delta.subspan(off, row), parity);
      off = (off + 4093) % (frag - row);  // scattered rows, as embedding lookups are
    });

    // One parity holder's share of the same row updates (each holder applies its own row): the
    // first parity row (all ones: an XOR) and, with m > 1, the second (ISA-L's table multiply).
    auto holder_rate = [&](int j) {
      off = 0;
      return rate(row, [&] {
        codec.update_row(j, 1, off, delta.subspan(off, row), parity[static_cast<std::size_t>(j)]);
        off = (off + 4093) % (frag - row);
      });
    };
    const double upd_row1 = holder_rate(0), upd_row2 = m > 1 ? holder_rate(1) : 0;
    // The same holder's update of a whole fragment: parity row 0 is ec::xor_delta in place, row 1
    // ISA-L's ec_encode_data_update (GF multiply and XOR).
    const double frag_row1 = rate(frag, [&] { codec.update_row(0, 1, 0, delta, parity[0]); });
    const double frag_row2 = m > 1 ? rate(frag, [&] { codec.update_row(1, 1, 0, delta, parity[1]); }) : 0;

    auto decode_rate = [&](int lost) {
      std::vector<int> erased;
      for (int i = 0; i < lost; ++i) erased.push_back(i);  // data fragments: the costly case
      const auto& plan = codec.plan(erased);
      std::vector<ec::ConstBytes> src;
      for (int f : plan.sources()) src.emplace_back(s.frags[static_cast<std::size_t>(f)]);
      auto out = copy.out(0, lost);
      const double r = rate(frag * static_cast<std::size_t>(k), [&] { codec.decode(plan, src, out); });
      for (int i = 0; i < lost; ++i) verified &= out[static_cast<std::size_t>(i)].size() == frag &&
                                                std::memcmp(out[static_cast<std::size_t>(i)].data(),
                                                            s.frags[static_cast<std::size_t>(i)].data(), frag) == 0;
      return r;
    };
    codec.encode(data, parity);  // the update runs above left the parity out of step with the data
    const double dec1 = decode_rate(1), decm = m > 1 ? decode_rate(m) : dec1;

    auto line = [&](const char* what, double v) { std::printf("%-4d %-4d %-22s %10.2f %8.2f\n", k, m, what, v, v / mc); };
    line("memcpy (baseline)", mc);
    line("encode", enc);
    line("update (fragment)", upd);
    line("update (256 B row)", upd_row);
    std::printf("%-4d %-4d %-22s %10.2f M rows/s\n", k, m, "  = row updates", upd_row * 1e9 / row / 1e6);
    line("update_row 0 (XOR row)", upd_row1);
    std::printf("%-4d %-4d %-22s %10.2f M rows/s\n", k, m, "  = per holder", upd_row1 * 1e9 / row / 1e6);
    if (m > 1) {
      line("update_row 1 (GF mul)", upd_row2);
      std::printf("%-4d %-4d %-22s %10.2f M rows/s\n", k, m, "  = per holder", upd_row2 * 1e9 / row / 1e6);
    }
    line("update_row 0 (fragment)", frag_row1);
    if (m > 1) {
      line("update_row 1 (fragment)", frag_row2);
      std::printf("%-4d %-4d %-22s %10.2f x (XOR row / GF row, >= 1 wanted)\n", k, m, "  = XOR vs GF mul", frag_row1 / frag_row2);
    }
    // Locating a corrupt row (ec-train --scrub): a CRC-32C of the row where it lies, against the
    // code's syndrome of its codeword (re-encode the parity row from the k data rows and compare),
    // which also needs the k rows gathered from k ranks first.
    off = 0;
    std::uint32_t sink = 0;
    const double crc_row = rate(row, [&] {
      sink ^= crc32_iscsi(reinterpret_cast<unsigned char*>(s.frags[0].data() + off), static_cast<int>(row), 0xFFFFFFFFu);
      off = (off + 4093) % (frag - row);
    });
    std::vector<std::byte> syn(row);
    std::vector<ec::ConstBytes> rows;
    rows.reserve(static_cast<std::size_t>(k));
    off = 0;
    const double syndrome_row = rate(row * static_cast<std::size_t>(k), [&] {
      rows.clear();
      for (int i = 0; i < k; ++i) rows.emplace_back(s.frags[static_cast<std::size_t>(i)].data() + off, row);
      codec.encode_row(0, rows, syn);
      sink ^= static_cast<std::uint32_t>(std::memcmp(syn.data(), s.frags[static_cast<std::size_t>(k)].data() + off, row) != 0);
      off = (off + 4093) % (frag - row);
    });
    line("crc32c (256 B row)", crc_row);
    std::printf("%-4d %-4d %-22s %10.2f M rows/s (%u)\n", k, m, "  = rows checked", crc_row * 1e9 / row / 1e6, sink & 0u);
    std::printf("%-4d %-4d %-22s %10.2f M codewords/s, local work only\n", k, m, "syndrome (256 B rows)", syndrome_row * 1e9 / row / static_cast<double>(k) / 1e6);
    line("decode (1 lost)", dec1);
    if (m > 1) line(("decode (" + std::to_string(m) + " lost)").c_str(), decm);
  }
  if (!verified) {
    std::fprintf(stderr, "bench_ec_codec: error: decoded fragments differ from the originals\n");
    return 1;
  }
  return 0;
}
