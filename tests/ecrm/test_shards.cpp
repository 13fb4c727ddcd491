// The real ECRM protocol code (resil::ecrm: shard store, row exchange, parity deltas, recovery)
// driven over an in-process transport: N simulated ranks on threads of one process. A small
// training loop (random rows per rank and step, an update that depends on the values read) runs
// with and without failures; the failure runs must end bit-identical to the failure-free one,
// with every parity fragment equal to a fresh encode.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include "inproc_transport.hpp"
#include "resil/core/error.hpp"
#include "resil/core/rng.hpp"
#include "resil/ecrm/parity_deltas.hpp"
#include "resil/ecrm/recovery.hpp"
#include "resil/ecrm/row_exchange.hpp"
#include "resil/ecrm/shard_store.hpp"

using namespace resil;
using namespace resil::ecrm;

namespace {

struct Shape {
  int k, m, ranks, tables, dim;
  std::uint32_t rows, rows_per_fragment;
};

struct Outcome {
  std::string hash;              // rank 0's hash of every row
  std::uint64_t parity_bad = 0;  // parity fragments differing from a fresh encode, all ranks
  std::uint64_t degraded = 0;    // rows decoded on the fly, all ranks and steps
};

// One simulated rank's protocol objects, as the engine wires them.
struct Rank {
  ShardStore store;
  Recovery recovery;
  ParityDeltas deltas;
  RowExchange rows;
  Rank(const Transport& net, const Shape& s)
      : store(net, s.k, s.m, s.tables, s.rows, s.dim, s.rows_per_fragment), recovery(net, store, s.m), deltas(net, store, recovery),
        rows(net, store, recovery) {}
};

// `steps` steps of a toy training loop; at the start of step f.step rank f.rank loses its memory.
// Every rebuild round handles `rebuild` stripes per replacement (0: all at once).
Outcome run_toy(const Shape& s, int steps, const std::vector<FailSpec>& fail, std::uint64_t rebuild) {
  Outcome out;
  std::mutex mu;
  test::run_ranks(s.ranks, [&](const Transport& net) {
    Rank r(net, s);
    r.store.init_rows(7);
    r.store.encode_all();
    std::uint64_t degraded = 0;
    const auto d = static_cast<std::size_t>(s.dim);
    for (int step = 1; step <= steps; ++step) {
      std::vector<int> failing;
      for (const auto& f : fail)
        if (f.step == step) failing.push_back(f.rank);
      if (!failing.empty()) {
        r.deltas.flush();  // failures strike at a commit boundary
        for (int q : failing) r.recovery.fail(q);
      }
      // A batch of 9 samples per rank, drawn from (rank, step).
      LocalBatch b;
      b.n = 9;
      Rng rng(derive_seed(11, static_cast<std::uint64_t>(step)), static_cast<std::uint64_t>(net.rank()));
      for (int i = 0; i < b.n; ++i)
        for (int t = 0; t < s.tables; ++t) b.rows.push_back(static_cast<std::int32_t>(rng.below(s.rows)));
      const bool recovering = r.recovery.any_lost();
      const auto committed = r.deltas.pending_step();
      r.rows.request(b, r.deltas.outgoing());
      r.deltas.sent();
      auto commit = [&] {
        if (committed >= 0) r.deltas.apply(static_cast<std::uint64_t>(committed), r.rows.extra_received());
      };
      if (recovering) commit();
      const auto jobs = recovering ? r.recovery.take_rebuild_jobs(rebuild) : std::vector<Recovery::RebuildJob>{};
      r.rows.serve(jobs, recovering ? std::function<void()>{} : std::function<void()>(commit));
      r.rows.decode(jobs, static_cast<std::uint64_t>(step - 1));
      degraded += r.rows.degraded_rows();
      // The "gradient" of a row depends on the weights read (so a wrong degraded read changes
      // the result): g = 0.25 * w + 0.01 * step.
      std::vector<std::vector<float>> grad(r.rows.rows().size());
      for (std::size_t t = 0; t < grad.size(); ++t)
        for (float w : r.rows.rows()[t]) grad[t].push_back(0.25f * w + 0.01f * static_cast<float>(step));
      const auto gsum = r.rows.gradients(grad);
      // Update: w -= 0.1 g, accumulator += g (the whole row changes, as Adagrad's does).
      const auto& owned = r.rows.owned();
      const auto old = r.rows.old_bytes();
      for (std::size_t i = 0; i < owned.size(); ++i) {
        std::vector<float> v(2 * d);
        std::memcpy(v.data(), old.data() + i * r.store.row_bytes(), r.store.row_bytes());
        for (std::size_t q = 0; q < d; ++q) {
          v[q] -= 0.1f * gsum[i * d + q];
          v[d + q] += gsum[i * d + q];
        }
        std::memcpy(r.store.row(owned[i]).data(), v.data(), r.store.row_bytes());
      }
      r.deltas.build(step, owned, r.rows.places(), old);
    }
    r.deltas.flush();
    while (r.recovery.any_lost()) r.recovery.rebuild(0, static_cast<std::uint64_t>(steps));
    const auto bad = r.store.verify_parity();
    ckpt::Xxh64 h;
    r.store.hash_into(h);
    std::vector<double> deg{static_cast<double>(degraded)};
    net.allreduce_sum_ordered(deg);
    if (net.rank() == 0) {
      std::lock_guard lock(mu);
      out.hash = ckpt::hex_u64(h.digest());
      out.parity_bad = bad;
      out.degraded = static_cast<std::uint64_t>(deg[0]);
    }
  });
  return out;
}

}  // namespace

TEST_CASE("the real shard store, exchange and recovery survive failures bit-exactly (in-process ranks)", "[ec][unit]") {
  const auto [k, m, n] = GENERATE(table<int, int, int>({{2, 1, 3}, {4, 2, 7}, {3, 2, 8}}));
  INFO("k=" << k << " m=" << m << " N=" << n);
  const Shape s{k, m, n, 2, 4, 50, 2};
  const auto ref = run_toy(s, 12, {}, 3);
  CHECK(ref.parity_bad == 0);
  CHECK(ref.degraded == 0);
  REQUIRE(!ref.hash.empty());

  SECTION("one failure, rebuilt over several steps while training goes on") {
    const auto run = run_toy(s, 12, {{1, 4}}, 3);
    CHECK(run.hash == ref.hash);
    CHECK(run.parity_bad == 0);
    CHECK(run.degraded > 0);  // the owner decoded its lost rows on the fly
  }
  SECTION("m failures at once, rebuilt in the failure step") {
    std::vector<FailSpec> f;
    for (int q = 0; q < m; ++q) f.push_back({(2 * q + 1) % n, 5});
    const auto run = run_toy(s, 12, f, 0);
    CHECK(run.hash == ref.hash);
    CHECK(run.parity_bad == 0);
  }
  SECTION("the same rank fails again during its rebuild") {
    const auto run = run_toy(s, 12, {{0, 3}, {0, 5}}, 1);
    CHECK(run.hash == ref.hash);
    CHECK(run.parity_bad == 0);
  }
}

TEST_CASE("the lost-member table is global knowledge and finds stripes beyond m", "[ec][unit]") {
  const Shape s{2, 1, 4, 1, 2, 40, 2};
  test::run_ranks(s.ranks, [&](const Transport& net) {
    ShardStore store(net, s.k, s.m, s.tables, s.rows, s.dim, s.rows_per_fragment);
    Recovery rec(net, store, s.m);
    if (rec.any_lost()) throw std::runtime_error("a fresh table has lost members");
    rec.fail(1);
    if (!rec.any_lost() || rec.over_limit()) throw std::runtime_error("one failure with m = 1 must be tolerated");
    std::uint64_t lost_here = 0;
    for (std::uint64_t st = 0; st < store.layout().stripes(); ++st) lost_here += rec.lost(1, st);
    if (lost_here != rec.pending(1)) throw std::runtime_error("pending count differs from the lost table");
    rec.fail(2);  // some stripe now has two members on ranks 1 and 2
    const auto over = rec.over_limit();
    if (!over || rec.erased(*over).size() != 2) throw std::runtime_error("a stripe with 2 lost members and m = 1 was not found");
    rec.clear_lost();
    if (rec.any_lost()) throw std::runtime_error("clear_lost left members lost");
  });
}

TEST_CASE("a parity delta applied twice is refused (exactly once)", "[ec][unit]") {
  const Shape s{2, 1, 3, 1, 2, 20, 2};
  std::atomic<int> refused{0};
  test::run_ranks(s.ranks, [&](const Transport& net) {
    Rank r(net, s);
    r.store.init_rows(3);
    r.store.encode_all();
    // One step's update of every row this rank owns, then its deltas delivered twice.
    std::vector<RowId> owned;
    std::vector<ec::RowPlace> place;
    for (std::uint32_t row = 0; row < s.rows; ++row)
      if (const auto p = r.store.layout().locate(0, row); p.rank == net.rank()) {
        owned.push_back({0, row});
        place.push_back(p);
      }
    std::vector<std::byte> old;
    for (const auto& id : owned) {
      const auto b = r.store.row(id);
      old.insert(old.end(), b.begin(), b.end());
      b[0] ^= std::byte{0x5A};
    }
    r.deltas.build(1, owned, place, old);
    const auto in = net.exchange(*r.deltas.outgoing());
    std::vector<ByteView> parts;
    for (int q = 0; q < in.size(); ++q) parts.push_back(in.from(q));
    r.deltas.apply(1, parts);
    bool has_parity = false;
    for (const auto& p : parts) has_parity = has_parity || !p.empty();
    try {
      r.deltas.apply(1, parts);
    } catch (const EcError&) {
      ++refused;
    }
    if (!has_parity) ++refused;  // a rank holding no parity of this table gets no deltas
    if (r.store.verify_parity() != 0) throw std::runtime_error("parity differs after one application");
  });
  CHECK(refused == s.ranks);
}
