// resil::ecrm::Scrub over the in-process transport (N simulated ranks on threads): row checksums
// locate corrupt rows of data and parity fragments, the code repairs them (up to m members of one
// codeword, also with a member lost), a corrupt checksum word is told apart from corrupt bytes, a
// delta folded into a corrupt parity row keeps the error visible, and more than m corrupt members of
// one codeword is refused with ScrubLossError naming it. Each repaired store must equal the one
// before the flips, byte for byte, with its parity equal to a fresh encode.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "inproc_transport.hpp"
#include "resil/ecrm/parity_deltas.hpp"
#include "resil/ecrm/recovery.hpp"
#include "resil/ecrm/scrub.hpp"
#include "resil/ecrm/shard_store.hpp"

using namespace resil;
using namespace resil::ecrm;

namespace {

constexpr int K = 3, M = 2, N = 5, TABLES = 2, DIM = 4;
constexpr std::uint32_t ROWS = 90, B = 3;

struct Flip {
  std::uint64_t stripe;
  int member;
  std::uint32_t row, byte;  // byte within the row; row_bytes + i: byte i of the checksum word instead
};

std::span<std::byte> row_of(ShardStore& st, const MemberRow& r) {
  const auto& lay = st.layout();
  const int t = lay.table_of(r.stripe);
  return st.member(t, static_cast<int>(r.member), lay.place(r.stripe, static_cast<int>(r.member))).subspan(std::size_t{r.row} * st.row_bytes(), st.row_bytes());
}

// Flip, sweep the whole store, repair; returns the repairs (every rank's list is the same) and
// whether the store came back byte for byte.
struct Result {
  std::vector<ScrubRepair> repairs;
  bool restored = true;
  std::uint64_t parity_bad = 0;
  std::string error;
};

Result scrub_after(const std::vector<Flip>& flips, const std::vector<int>& lost_ranks = {}) {
  Result res;
  std::mutex mu;
  test::run_ranks(N, [&](const Transport& net) {
    ShardStore st(net, K, M, TABLES, ROWS, DIM, B, true, true);
    Recovery rec(net, st, M);
    Scrub scrub(net, st, rec);
    st.init_rows(5);
    st.encode_all();
    std::vector<std::byte> all_before;
    for (int t = 0; t < TABLES; ++t) all_before.insert(all_before.end(), st.data_store(t).begin(), st.data_store(t).end());
    for (const auto& f : flips) {
      if (st.layout().rank_of(f.stripe, f.member) != net.rank()) continue;
      const MemberRow r{f.stripe, static_cast<std::uint32_t>(f.member), f.row};
      if (f.byte < st.row_bytes()) {
        row_of(st, r)[f.byte] ^= std::byte{0x10};
      } else {
        const auto& lay = st.layout();
        auto& sum = st.checksum(lay.table_of(f.stripe), f.member, lay.place(f.stripe, f.member), f.row);
        sum ^= 1u << (8 * (f.byte - st.row_bytes()));
      }
    }
    for (int q : lost_ranks) rec.fail(q, false);  // lost, not wiped: their rows are simply not read
    scrub.sweep(st.layout().stripes());
    try {
      const auto done = scrub.repair(1, 0.0);
      std::lock_guard lock(mu);
      if (net.rank() == 0) res.repairs = done;
    } catch (const ScrubLossError& e) {
      std::lock_guard lock(mu);
      res.error = e.what();
      return;
    }
    std::vector<std::byte> all_after;
    for (int t = 0; t < TABLES; ++t) all_after.insert(all_after.end(), st.data_store(t).begin(), st.data_store(t).end());
    if (lost_ranks.empty()) {
      const auto bad = st.verify_parity();
      std::lock_guard lock(mu);
      res.parity_bad = bad;
    }
    std::lock_guard lock(mu);
    if (all_after != all_before && std::find(lost_ranks.begin(), lost_ranks.end(), net.rank()) == lost_ranks.end()) res.restored = false;
  });
  return res;
}

}  // namespace

TEST_CASE("scrub: a corrupt data row and a corrupt parity row are located and repaired", "[ec][unit][scrub]") {
  const auto r = scrub_after({{4, 1, 2, 5}, {7, 3, 0, 17}, {11, 4, 1, 0}});
  REQUIRE(r.error.empty());
  CHECK(r.restored);
  CHECK(r.parity_bad == 0);
  REQUIRE(r.repairs.size() == 3);
  CHECK(r.repairs[0].stripe == 4);
  CHECK(r.repairs[0].kind == "data");
  CHECK(r.repairs[1].kind == "parity");
  CHECK(r.repairs[2].kind == "parity");
}

TEST_CASE("scrub: m corrupt members of one codeword are repaired; one more is refused, naming it", "[ec][unit][scrub]") {
  const auto ok = scrub_after({{9, 0, 1, 3}, {9, 4, 1, 30}});  // a data and a parity member, m = 2
  REQUIRE(ok.error.empty());
  CHECK(ok.restored);
  CHECK(ok.parity_bad == 0);
  CHECK(ok.repairs.size() == 2);
  const auto two_data = scrub_after({{9, 0, 1, 3}, {9, 2, 1, 7}});
  REQUIRE(two_data.error.empty());
  CHECK(two_data.restored);
  // The same rows at another offset of the stripe are another codeword: repaired.
  const auto spread = scrub_after({{9, 0, 0, 3}, {9, 1, 1, 7}, {9, 2, 2, 9}});
  REQUIRE(spread.error.empty());
  CHECK(spread.restored);
  const auto beyond = scrub_after({{9, 0, 1, 3}, {9, 2, 1, 7}, {9, 3, 1, 1}});
  CHECK_THAT(beyond.error, Catch::Contains("stripe 9 (table 0) row 1: members 0@rank") && Catch::Contains("more corrupt or lost members than m = 2"));
}

TEST_CASE("scrub: a codeword's corrupt members are decoded together, beside another corrupt row of one of them", "[ec][unit][scrub]") {
  // Member 0 is corrupt at rows 1 and 2, member 1 at row 1: codeword (9, row 1) has two erasures, to
  // be decoded from the k other members at once. Decoded one member at a time, each would take the
  // other corrupt member as a source and write wrong bytes under a fresh checksum.
  const auto ok = scrub_after({{9, 0, 1, 3}, {9, 1, 1, 7}, {9, 0, 2, 5}});
  REQUIRE(ok.error.empty());
  CHECK(ok.restored);
  CHECK(ok.parity_bad == 0);
  CHECK(ok.repairs.size() == 3);
  // m + 1 corrupt members of row 1, with member 0 corrupt at row 2 too: refused, naming row 1.
  const auto beyond = scrub_after({{9, 0, 1, 3}, {9, 1, 1, 7}, {9, 3, 1, 1}, {9, 0, 2, 5}});
  CHECK_THAT(beyond.error, Catch::Contains("stripe 9 (table 0) row 1: members 0@rank") && Catch::Contains("more corrupt or lost members than m = 2"));
}

TEST_CASE("scrub: a corrupt member beside a lost one counts against m", "[ec][unit][scrub]") {
  // Rank 2 lost: its members are erasures. One corrupt member more in a stripe with a lost one
  // is still within m = 2; two more are not.
  const std::uint64_t s = 3;  // members on ranks (3 + j) mod 5: member 4 is on rank 2
  const auto ok = scrub_after({{s, 0, 0, 1}}, {2});
  REQUIRE(ok.error.empty());
  CHECK(ok.restored);
  const auto beyond = scrub_after({{s, 0, 0, 1}, {s, 1, 0, 2}}, {2});
  CHECK_THAT(beyond.error, Catch::Contains("and 1 lost"));
}

TEST_CASE("scrub: a corrupt checksum word is rewritten, the row left as it is", "[ec][unit][scrub]") {
  const auto r = scrub_after({{5, 1, 2, static_cast<std::uint32_t>(8 * DIM + 2)}});
  REQUIRE(r.error.empty());
  CHECK(r.restored);
  REQUIRE(r.repairs.size() == 1);
  CHECK(r.repairs[0].kind == "checksum");
}

TEST_CASE("scrub: a delta folded into a corrupt parity row keeps the error visible", "[ec][unit][scrub]") {
  // The parity row is flipped, then a data row of its codeword is updated and its delta folded in:
  // the fold reports the row, and its checksum still differs afterwards (it follows the fold).
  std::mutex mu;
  std::vector<MemberRow> reported;
  bool still_bad = false, repaired = false;
  test::run_ranks(N, [&](const Transport& net) {
    ShardStore st(net, K, M, TABLES, ROWS, DIM, B, true, true);
    Recovery rec(net, st, M);
    ParityDeltas deltas(net, st, rec);
    Scrub scrub(net, st, rec);
    deltas.report_mismatches(&scrub.suspects());
    st.init_rows(5);
    st.encode_all();
    const auto& lay = st.layout();
    const std::uint64_t stripe = 2;
    const MemberRow prow{stripe, 3, 1};
    if (lay.rank_of(stripe, 3) == net.rank()) row_of(st, prow)[9] ^= std::byte{0x80};
    // Row 1 of data member 0 of stripe 2, updated by its owner.
    std::vector<RowId> owned;
    std::vector<ec::RowPlace> place;
    std::vector<std::byte> old, fresh;
    const std::uint32_t table_row = static_cast<std::uint32_t>((stripe - lay.first_stripe(0)) * K * B + 1);
    if (const auto p = lay.locate(0, table_row); p.rank == net.rank()) {
      owned.push_back({0, table_row});
      place.push_back(p);
      const auto b = st.row({0, table_row});
      old.assign(b.begin(), b.end());
      b[0] ^= std::byte{0x01};
      fresh.assign(b.begin(), b.end());
      st.follow(st.checksum(0, p.fragment, {p.rank, p.slot}, static_cast<std::uint32_t>(p.offset / st.row_bytes())), old, fresh);
    }
    deltas.build(1, owned, place, old, fresh);
    deltas.flush();
    if (lay.rank_of(stripe, 3) == net.rank()) {
      const auto& sums = scrub.suspects();
      const auto b = row_of(st, prow);
      std::lock_guard lock(mu);
      reported = sums;
      still_bad = ShardStore::crc(b) != st.checksum(0, 3, lay.place(stripe, 3), 1);
    }
    const auto done = scrub.repair(2, 0.0);
    const auto bad = st.verify_parity();
    std::lock_guard lock(mu);
    if (net.rank() == 0) repaired = done.size() == 1 && done[0].kind == "parity" && bad == 0;
  });
  REQUIRE(reported.size() == 1);
  CHECK(reported[0] == MemberRow{2, 3, 1});
  CHECK(still_bad);
  CHECK(repaired);
}
