// One step's row exchange between the ranks (parameter servers and workers at once):
//   request  each distinct row of the local batch from its owner; a row whose fragment is lost
//            (global knowledge) also from the k survivors its decode reads, so degraded reads add
//            bytes to the step's exchanges, not rounds. Other framed parts (the last step's parity
//            deltas) ride in the same message.
//   serve    per rank: the weights of the rows it asked (not lost ones), this rank's member bytes
//            for each degraded read asked of it, whole rows for each owner of a lost row it is a
//            source of (the owner needs the accumulators too), whole source fragments for that
//            rank's rebuild jobs; one exchange.
//   decode   the weights of lost rows (degraded reads), whole lost rows this rank owns, and this
//            round's rebuild jobs.
//   gradients  row gradients back to their owners, summed in rank order (failure-independent).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "resil/ecrm/batches.hpp"
#include "resil/ecrm/recovery.hpp"

namespace resil::ecrm {

class RowExchange {
public:
  RowExchange(const Transport& net, ShardStore& store, Recovery& recovery) : net_(net), store_(store), rec_(recovery) {}

  /// Collective. `extra`: another framed part per destination (may be null), read back with extra_received().
  void request(const LocalBatch& b, const std::vector<ByteVec>* extra);
  /// What each rank sent in the `extra` part of its request (valid until the next request).
  const std::vector<ByteView>& extra_received() const noexcept { return extra_in_; }
  /// Collective: build and exchange the replies. Rebuild `jobs` (identical on every rank) are
  /// served too; `while_waiting` runs while the replies travel. Returns the seconds spent building
  /// recovery bytes (degraded reads, rebuild sources).
  double serve(const std::vector<Recovery::RebuildJob>& jobs, const std::function<void()>& while_waiting);
  /// Read the replies: rows into rows(t); degraded reads and lost own rows decoded, this round's
  /// rebuild jobs finished with data as of `committed_step`.
  void decode(const std::vector<Recovery::RebuildJob>& jobs, std::uint64_t committed_step);

  /// The batch's distinct rows of table t (uniq_t x dim), and each sample's position among them.
  const std::vector<std::vector<float>>& rows() const noexcept { return emb_; }
  const std::vector<std::vector<std::int32_t>>& positions() const noexcept { return idx_; }
  /// Rows this rank decoded on the fly this step (its own lost rows).
  std::uint64_t degraded_rows() const noexcept { return lost_pos_.size(); }

  /// Collective: `grad[t]` (uniq_t x dim, as rows()) to the rows' owners; returns the sum over
  /// ranks, in rank order, of the gradients of owned() (owned().size() x dim).
  std::vector<float> gradients(const std::vector<std::vector<float>>& grad);
  /// Rows of this rank that the step touches (sorted), their places, their bytes before the update.
  const std::vector<RowId>& owned() const noexcept { return owned_; }
  const std::vector<ec::RowPlace>& places() const noexcept { return place_; }
  std::span<const std::byte> old_bytes() const noexcept { return old_; }
  /// Rows of lost fragments whose decode reads this rank's member of their stripe this step
  /// (degraded reads asked of it, lost rows it sends whole to their owner); valid after request().
  const std::vector<RowId>& decode_sources() const noexcept { return serve_; }

private:
  struct Degraded {
    int table, pos;   // the row: table, position in uniq
    ec::RowPlace at;  // its place
  };
  std::size_t pos_of(const RowId& id) const;

  const Transport& net_;
  ShardStore& store_;
  Recovery& rec_;
  bool recovering_ = false;
  std::vector<std::vector<std::int32_t>> uniq_, idx_;
  std::vector<std::vector<std::pair<int, int>>> order_;   // per owner: (table, position in uniq) asked
  std::vector<std::vector<std::uint8_t>> order_lost_;     // per order entry: asked degraded
  std::vector<Degraded> my_lost_;                         // this rank's degraded reads, in the order asked
  Inbox asked_raw_;
  std::vector<std::vector<RowId>> asked_, deg_asked_;     // per rank: rows it asked of this one
  std::vector<ByteView> extra_in_;
  std::vector<RowId> owned_, serve_;                      // serve_: lost rows this rank is a decode source of
  std::vector<ec::RowPlace> place_;
  std::vector<std::byte> old_;
  std::vector<std::size_t> lost_pos_;
  Inbox got_;
  std::vector<Reader> from_;
  std::vector<std::vector<float>> emb_;
};

}  // namespace resil::ecrm
